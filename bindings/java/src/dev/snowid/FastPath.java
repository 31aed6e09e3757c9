// SPDX-License-Identifier: MIT
package dev.snowid;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.util.concurrent.locks.LockSupport;

/**
 * {@link SnowId#next()} without JNI: libsnowid's fast path (libclient/next.c,
 * take() for one value) done in Java on the segment's mappings with
 * {@code sun.misc.Unsafe}, module jdk.unsupported.  Everything else (waits,
 * following a new segment, refusals, errors) stays in libsnowid: this returns
 * -1 and the caller asks JNI, which does it all.
 *
 * <p>What keeps it sound:
 * <ul>
 * <li>The offsets come from the C structs (JNI's shmLayout0), and a segment
 * of another version than the glue's is not read here.
 * <li>Its clock is {@link System#nanoTime()}, which the JDK reads from
 * CLOCK_MONOTONIC on Linux: checked against the glue's clock_gettime() at
 * start, and not used when the two differ.  (It never reads the TSC line:
 * Java has no RDTSC.  Clocks never decide uniqueness; the counter does.)
 * <li>The segment's mappings stay until the SnowId is unreachable (the glue
 * keeps them past close() once this has them, and each call ends with a
 * reachability fence), so no thread can be inside this when they go.
 * </ul>
 * Without jdk.unsupported (or with {@code -Dsnowid.unsafe=false}) every call
 * goes through JNI.
 */
final class FastPath {
    /* sun.misc.Unsafe's calls, bound to its instance: found by name, so
     * that this compiles and loads without jdk.unsupported (static final
     * handles called with invokeExact compile to the calls themselves) */
    private static final MethodHandle GET_LONG_VOLATILE, GET_LONG, GET_INT, GET_BYTE, CAS_LONG,
            GET_AND_ADD_LONG, LOAD_FENCE;
    /** null when the fast path is on; otherwise why not, for status. */
    static final String OFF;

    /* shm/segment.h, by index of shmLayout0's answer */
    private static final long GEN, DEADLINE, OFFSET_NS, WORKER, WORKER_BITS, SEQ_BITS, LEAD_MS;
    private static final long LINES, LINE_SIZE, LINE_MASK, ISSUED, DROPPED, TSC_SPAN;
    private static final long WAITS_CEILING, EAGAIN_COUNT;
    /** EAGAIN's number, for SnowId's exception when the budget is spent here */
    static final int EAGAIN;
    /* libsnowid reads the TSC line when snowidd publishes one, unless the
     * process refuses it (SNOWID_NO_TSC set to anything but 0, as
     * snowid.c's tsc_policy() reads it) */
    private static final boolean LIB_TSC = libTsc(System.getenv("SNOWID_NO_TSC"));

    private static boolean libTsc(String e) {
        return e == null || e.isEmpty() || e.equals("0");
    }
    static final long VERSION, DEFAULT_WAIT_NS;

    static {
        MethodHandle[] m = new MethodHandle[7];
        String off = null;
        long[] l = new long[18];
        int described;
        try {
            described = SnowId.shmLayout0(l);
        } catch (LinkageError e) { /* a glue from before the fast path */
            described = -1;
        }
        if (described < 0) {
            off = "the JNI glue does not describe the segment";
        } else if (!"true".equals(System.getProperty("snowid.unsafe", "true"))) {
            off = "-Dsnowid.unsafe=" + System.getProperty("snowid.unsafe");
        } else if (Long.bitCount(l[10]) != 1) {
            off = "the segment's lines are not a power of two";
        } else if (!sameClock()) {
            off = "System.nanoTime() is not CLOCK_MONOTONIC";
        } else {
            try {
                Class<?> c = Class.forName("sun.misc.Unsafe");
                Field f = c.getDeclaredField("theUnsafe");
                f.setAccessible(true);
                Object u = f.get(null);
                MethodHandles.Lookup l0 = MethodHandles.lookup();
                Class<?> j = long.class, o = Object.class;
                m[0] = l0.findVirtual(c, "getLongVolatile", MethodType.methodType(j, o, j)).bindTo(u);
                m[1] = l0.findVirtual(c, "getLong", MethodType.methodType(j, j)).bindTo(u);
                m[2] = l0.findVirtual(c, "getInt", MethodType.methodType(int.class, j)).bindTo(u);
                m[3] = l0.findVirtual(c, "getByte", MethodType.methodType(byte.class, j)).bindTo(u);
                m[4] = l0.findVirtual(c, "compareAndSwapLong",
                        MethodType.methodType(boolean.class, o, j, j, j)).bindTo(u);
                m[5] = l0.findVirtual(c, "getAndAddLong", MethodType.methodType(j, o, j, j))
                        .bindTo(u);
                m[6] = l0.findVirtual(c, "loadFence", MethodType.methodType(void.class)).bindTo(u);
                probe(l0, c, u, m[1]);
            } catch (Throwable e) { /* no jdk.unsupported, or refused: JNI */
                m = new MethodHandle[7];
                off = "no sun.misc.Unsafe (" + e + ")";
            }
        }
        GET_LONG_VOLATILE = m[0];
        GET_LONG = m[1];
        GET_INT = m[2];
        GET_BYTE = m[3];
        CAS_LONG = m[4];
        GET_AND_ADD_LONG = m[5];
        LOAD_FENCE = m[6];
        OFF = m[6] != null ? null : off;
        VERSION = l[0];
        GEN = l[1];
        DEADLINE = l[2];
        OFFSET_NS = l[3];
        WORKER = l[4];
        WORKER_BITS = l[5];
        SEQ_BITS = l[6];
        LEAD_MS = l[7];
        LINES = l[8];
        LINE_SIZE = l[9];
        LINE_MASK = l[10] - 1;
        ISSUED = l[11];
        DROPPED = l[12];
        DEFAULT_WAIT_NS = l[13] * 1000;
        TSC_SPAN = l[14];
        WAITS_CEILING = l[15];
        EAGAIN_COUNT = l[16];
        EAGAIN = (int) l[17];
    }

    private FastPath() {
    }

    /* One read of memory of our own through the handles: a JVM that refuses
     * Unsafe's memory access (JDK 23's --sun-misc-unsafe-memory-access=deny)
     * finds the methods, then throws at the call. */
    private static void probe(MethodHandles.Lookup l0, Class<?> c, Object u, MethodHandle getLong)
            throws Throwable {
        MethodHandle alloc = l0.findVirtual(c, "allocateMemory",
                MethodType.methodType(long.class, long.class)).bindTo(u);
        MethodHandle put = l0.findVirtual(c, "putLong",
                MethodType.methodType(void.class, long.class, long.class)).bindTo(u);
        MethodHandle free = l0.findVirtual(c, "freeMemory",
                MethodType.methodType(void.class, long.class)).bindTo(u);
        long a = (long) alloc.invokeExact(8L);
        try {
            put.invokeExact(a, 42L);
            if ((long) getLong.invokeExact(a) != 42L)
                throw new IllegalStateException("Unsafe reads back another value");
        } finally {
            free.invokeExact(a);
        }
    }

    /* t1 <= CLOCK_MONOTONIC <= t2 when nanoTime() reads it (100 us of slack) */
    private static boolean sameClock() {
        for (int i = 0; i < 3; i++) {
            long t1 = System.nanoTime(), m = SnowId.monotonicNs0(), t2 = System.nanoTime();
            if (m - t1 >= -100_000 && t2 - m >= -100_000)
                return true;
        }
        return false;
    }

    /** One segment's mappings (addresses in this process). */
    static final class Seg {
        final long ctl, ctr;

        Seg(long ctl, long ctr) {
            this.ctl = ctl;
            this.ctr = ctr;
        }
    }

    /** The segment to use for out[] from segment0, or null (not this version). */
    static Seg seg(long[] out) {
        return OFF == null && out[2] == VERSION ? new Seg(out[0], out[1]) : null;
    }

    /* the Unsafe calls; a Throwable from one would be a bug here */
    private static long getLongVolatile(long a) {
        try {
            return (long) GET_LONG_VOLATILE.invokeExact((Object) null, a);
        } catch (Throwable e) {
            throw new AssertionError(e);
        }
    }

    private static long getLong(long a) {
        try {
            return (long) GET_LONG.invokeExact(a);
        } catch (Throwable e) {
            throw new AssertionError(e);
        }
    }

    private static int getInt(long a) {
        try {
            return (int) GET_INT.invokeExact(a);
        } catch (Throwable e) {
            throw new AssertionError(e);
        }
    }

    private static int getUnsignedByte(long a) {
        try {
            return (byte) GET_BYTE.invokeExact(a) & 0xff;
        } catch (Throwable e) {
            throw new AssertionError(e);
        }
    }

    private static boolean cas(long a, long expect, long update) {
        try {
            return (boolean) CAS_LONG.invokeExact((Object) null, a, expect, update);
        } catch (Throwable e) {
            throw new AssertionError(e);
        }
    }

    private static long getAndAdd(long a, long d) {
        try {
            return (long) GET_AND_ADD_LONG.invokeExact((Object) null, a, d);
        } catch (Throwable e) {
            throw new AssertionError(e);
        }
    }

    private static void loadFence() {
        try {
            LOAD_FENCE.invokeExact();
        } catch (Throwable e) {
            throw new AssertionError(e);
        }
    }

    /* ID time in ms: CLOCK_MONOTONIC plus the published offset; before the
     * epoch 0, and a sum past either end reads as that end (next.c) */
    private static long idTimeMs(long ctl) {
        long ns = System.nanoTime(), off = getLong(ctl + OFFSET_NS), t = ns + off;
        if (((ns ^ t) & (off ^ t)) < 0)
            t = off > 0 ? Long.MAX_VALUE : 0;
        return t > 0 ? t / 1_000_000 : 0;
    }

    /**
     * One ID (&ge; 0); JNI_CLOCK: ask JNI, because libsnowid's clock is
     * cheaper (the TSC line is on: one RDTSC against System.nanoTime()'s
     * vDSO call, more than JNI's transition costs); or -1: ask JNI, and
     * look for a new segment after.  -1 is for everything but the common
     * case: an odd or changed generation, the counter at the lead bound or
     * the clock past the deadline, a damaged segment, and a value taken past
     * the lead bound when the budget cannot wait for it (dropped and
     * counted, as next.c counts values dropped on a switch).
     */
    static final long JNI_CLOCK = -2;
    /** the wait budget ran out here: EAGAIN, as libsnowid gives */
    static final long BUDGET_SPENT = -3;

    static long next(Seg g, long waitNs) {
        final long ctl = g.ctl, ctr = g.ctr;
        /* acquire, pairing with store_release(gen) in shm_pub_switch(): we
         * see the worker, layout and line that this generation published */
        long gen = getLongVolatile(ctl + GEN);
        if ((gen & 1) != 0)
            return -1;
        if (LIB_TSC && getLong(ctl + TSC_SPAN) != 0)
            return JNI_CLOCK;
        long now = idTimeMs(ctl);
        int worker = getInt(ctl + WORKER);
        int wb = getUnsignedByte(ctl + WORKER_BITS), sb = getUnsignedByte(ctl + SEQ_BITS);
        long deadline = getLong(ctl + DEADLINE);
        long lead = getUnsignedByte(ctl + LEAD_MS);
        if (sb > 31 || wb > 31 || worker >>> wb != 0 || deadline >>> (63 - wb - sb) != 0)
            return -1; /* JNI says EPROTO */
        /* deadline < 2^63 here, now < 2^54: signed compares hold */
        long limit = Math.min(now + lead, deadline);
        long line = ctr + LINES + ((gen >>> 1) & LINE_MASK) * LINE_SIZE;
        long x = getLongVolatile(line), xMs = x >>> sb;
        if (Long.compareUnsigned(xMs, limit) > 0 || now > deadline)
            return -1; /* no room: JNI waits before taking anything */
        /* the RMW makes the value unique; the ordering against gen is the
         * loadFence below (next.c: relaxed RMWs, then smp_rmb()) */
        long mask = (1L << sb) - 1;
        if (xMs >= now || !cas(line, x, (now << sb) + 1)) {
            x = getAndAdd(line, 1);
            /* this call took the last value of a ms: it closes */
            if ((x & mask) == mask)
                getAndAdd(ctr + ISSUED, mask + 1);
        } else {
            /* the counter moved on from x's ms: it closes with seq(x) taken */
            if ((x & mask) != 0)
                getAndAdd(ctr + ISSUED, x & mask);
            x = now << sb;
            /* no sequence bits: a ms of one value closes at once */
            if (mask == 0)
                getAndAdd(ctr + ISSUED, 1);
        }
        long ms = x >>> sb;
        if (Long.compareUnsigned(ms, limit) > 0) {
            int w = waitForClock(ctl, ctr, gen, ms, deadline, waitNs);
            if (w != GO) {
                if (w == SPENT)
                    return BUDGET_SPENT;
                getAndAdd(ctr + DROPPED, 1);
                return -1;
            }
        }
        /* pairs with smp_wmb() in shm_pub_switch(): if any load or RMW above
         * saw the work of a later switch, gen reads newer */
        loadFence();
        if (getLongVolatile(ctl + GEN) != gen) {
            getAndAdd(ctr + DROPPED, 1);
            return -1;
        }
        return ms << (wb + sb) | (long) worker << sb | (x & mask);
    }

    private static final int GO = 0, DROP = 1, SPENT = 2;

    /* A value held past the lead bound (other threads pushed the counter
     * between the check and the RMW): it stays good, so wait for the clock
     * to reach it, as next.c's wait_step() does: the clock before the
     * budget (a budget of 0 still looks once), counted once as a wait at the
     * ceiling, and as EAGAIN when the budget runs out.  DROP: past the
     * deadline (libsnowid waits for a new one) or gen changed. */
    private static int waitForClock(long ctl, long ctr, long gen, long ms, long deadline,
            long waitNs) {
        if (Long.compareUnsigned(ms, deadline) > 0)
            return DROP;
        long start = System.nanoTime();
        boolean counted = false;
        for (;;) {
            if (getLongVolatile(ctl + GEN) != gen)
                return DROP;
            long lead = getUnsignedByte(ctl + LEAD_MS), now = idTimeMs(ctl);
            if (Long.compareUnsigned(ms, now + lead) <= 0)
                return GO;
            if (!counted) {
                getAndAdd(ctr + WAITS_CEILING, 1);
                counted = true;
            }
            if (System.nanoTime() - start >= waitNs) {
                getAndAdd(ctr + EAGAIN_COUNT, 1);
                return SPENT;
            }
            /* short waits spin; long ones sleep (next.c's pause_briefly()) */
            if ((ms - lead - now) * 1_000_000 < 200_000)
                Thread.onSpinWait();
            else
                LockSupport.parkNanos(100_000);
        }
    }
}
