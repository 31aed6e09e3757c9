// SPDX-License-Identifier: MIT
package dev.snowid;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.time.Duration;
import java.util.Objects;
import java.util.UUID;

/**
 * A handle on the host's snowidd: unique, roughly time-ordered 64-bit IDs
 * taken from its shared-memory segment with one atomic operation (libsnowid,
 * through JNI).
 *
 * <p>IDs are unsigned 64-bit numbers whose top bit is never set (time_bits +
 * worker_bits + seq_bits == 63), so a Java {@code long} holds every one of
 * them as a non-negative value, and they compare and sort as longs do.
 *
 * <p>A handle may be shared between threads.  {@link #close()} may race calls
 * on other threads: it waits for the calls in progress (each within its wait
 * budget; the budget of calls that have not started waiting drops to 0), then
 * frees the segment; every later call throws a {@link SnowIdException} with
 * errno EINVAL (as libsnowid gives for a closed handle).  A handle never closed is closed when it becomes unreachable.
 *
 * <p>{@link #next()} runs libsnowid's fast path in Java on the segment's
 * mappings (with {@code sun.misc.Unsafe}, module jdk.unsupported), and
 * calls into libsnowid through JNI only to wait, to follow a new segment, or
 * to fail.  A handle that has used it keeps the mappings (a few KiB) from
 * {@link #close()} until it is unreachable.  Without jdk.unsupported, or
 * with {@code -Dsnowid.unsafe=false}, every call goes through JNI;
 * {@link #fastPath()} says which.
 *
 * <p>The JNI glue, libsnowid_jni.so, is loaded from the path in the system
 * property {@code snowid.jni.library} when set, else by
 * {@code System.loadLibrary("snowid_jni")} from {@code java.library.path}.
 */
public final class SnowId implements AutoCloseable {
    static {
        String path = System.getProperty("snowid.jni.library");
        if (path != null && !path.isEmpty())
            System.load(path);
        else
            System.loadLibrary("snowid_jni");
    }

    private static final Cleaner CLEANER = Cleaner.create();

    /** The native handle (a struct jh *); freed by the Cleaner only. */
    private final long h;
    /** The segment next() takes from without JNI; null: through JNI. */
    private volatile FastPath.Seg seg;
    private volatile boolean closed;
    /** The wait budget in ns, as libsnowid has it (for the fast path's one wait). */
    private volatile long waitNs;

    private SnowId(long h) {
        this.h = h;
        CLEANER.register(this, () -> free0(h));
        if (FastPath.OFF == null) {
            waitNs = FastPath.DEFAULT_WAIT_NS;
            refreshSeg();
        }
    }

    /* the handle's newest segment, after a call that may have followed one */
    private void refreshSeg() {
        long[] v = new long[3];
        FastPath.Seg g = segment0(h, v) == 0 ? FastPath.seg(v) : null;
        if (!closed)
            seg = g;
        if (closed) /* a close() in between: it must not see a segment after */
            seg = null;
    }

    /** Calls the fast path handed to JNI because it could not take an ID
     * (not those that go to JNI for the TSC clock: no count on that path). */
    static final java.util.concurrent.atomic.AtomicLong SLOW_CALLS =
            new java.util.concurrent.atomic.AtomicLong();

    /**
     * Whether {@link #next()} takes IDs without JNI here: null if it does,
     * else why not (no jdk.unsupported, {@code -Dsnowid.unsafe=false}, ...).
     */
    public static String fastPathOff() {
        return FastPath.OFF;
    }

    /** true when this handle's {@link #next()} takes IDs without JNI. */
    public boolean fastPath() {
        return seg != null;
    }

    /** Opens the instance named by $SNOWID_INSTANCE, or "default". */
    public static SnowId open() throws SnowIdException {
        return open(null);
    }

    /**
     * Gets the segment of {@code instance} (null: $SNOWID_INSTANCE or
     * "default") from snowidd over {@code <dir>/<instance>.sock}, dir being
     * $SNOWID_RUNTIME_DIR or /run/snowid.  ENOENT or ECONNREFUSED: no snowidd
     * listening; EACCES, EPERM, EXDEV, EPROTO, ECONNRESET, ETIMEDOUT, EAGAIN,
     * EINVAL, ENAMETOOLONG as snowid_open() documents them.
     */
    public static SnowId open(String instance) throws SnowIdException {
        long[] ret = new long[1];
        int r = open0(instance, ret);
        if (r < 0)
            throw new SnowIdException(-r, "open" + (instance != null ? " " + instance : ""));
        return new SnowId(ret[0]);
    }

    /**
     * One ID, always &ge; 0.  EAGAIN if none could be issued within the wait
     * budget (no lease, deadline reached, clock behind the counter).
     */
    public long next() throws SnowIdException {
        FastPath.Seg g = seg;
        if (g != null && !closed) {
            long id = FastPath.next(g, waitNs);
            /* the mappings go only with this object (the glue keeps them
             * past close()): it stays reachable until the fast path is done */
            Reference.reachabilityFence(this);
            if (id >= 0)
                return id;
            if (id == FastPath.BUDGET_SPENT)
                throw new SnowIdException(FastPath.EAGAIN, "next");
            if (id == FastPath.JNI_CLOCK)
                g = null; /* the segment is still the newest */
            else
                SLOW_CALLS.getAndIncrement();
        }
        return nextSlow(g);
    }

    private long nextSlow(FastPath.Seg g) throws SnowIdException {
        long r = next0(h);
        if (g != null && !closed)
            refreshSeg(); /* the call may have followed a new segment */
        if (r < 0)
            throw new SnowIdException((int) -r, "next");
        return r;
    }

    /** Fills {@code out} with IDs from one atomic operation, increasing. */
    public void next(long[] out) throws SnowIdException {
        next(out, 0, out.length);
    }

    /**
     * Fills {@code out[off .. off+len)} with IDs from one atomic operation,
     * increasing.  EINVAL unless 1 &le; len &le; 2^seq_bits; the array is left
     * untouched on failure.
     */
    public void next(long[] out, int off, int len) throws SnowIdException {
        Objects.checkFromIndexSize(off, len, out.length);
        int r = nextBatch0(h, out, off, len);
        if (r < 0)
            throw new SnowIdException(-r, "next batch of " + len);
    }

    /**
     * A UUIDv7 (RFC 9562) made from one counter value, taken as {@link #next()}
     * takes one (same errors).  It never equals another one, and sorts by time
     * as the IDs do (as unsigned bytes; {@link UUID#compareTo} compares signed
     * halves).
     */
    public UUID nextUuid7() throws SnowIdException {
        long[] v = new long[2];
        int r = nextUuid70(h, v);
        if (r < 0)
            throw new SnowIdException(-r, "next UUIDv7");
        return new UUID(v[0], v[1]);
    }

    /**
     * How long a call may wait (clock, deadline, a switch); zero never waits.
     * A budget too long to count in microseconds waits as long as it takes.
     */
    public void setMaxWait(Duration d) throws SnowIdException {
        if (d.isNegative())
            throw new IllegalArgumentException("negative wait budget");
        long us;
        try {
            us = Math.addExact(Math.multiplyExact(d.getSeconds(), 1_000_000L), d.getNano() / 1000);
        } catch (ArithmeticException e) {
            us = -1; /* UINT64_MAX: as long as it takes */
        }
        int r = setMaxWait0(h, us);
        if (r < 0)
            throw new SnowIdException(-r, "set max wait");
        waitNs = us < 0 || us > Long.MAX_VALUE / 1000 ? Long.MAX_VALUE : us * 1000;
    }

    /** {@link #setMaxWait(Duration)} in microseconds (&ge; 0). */
    public void setMaxWaitMicros(long usec) throws SnowIdException {
        if (usec < 0)
            throw new IllegalArgumentException("negative wait budget");
        int r = setMaxWait0(h, usec);
        if (r < 0)
            throw new SnowIdException(-r, "set max wait");
        waitNs = usec > Long.MAX_VALUE / 1000 ? Long.MAX_VALUE : usec * 1000;
    }

    /** The layout of this handle's IDs (the cluster's). */
    public Layout layout() throws SnowIdException {
        long[] v = new long[4];
        int r = layout0(h, v);
        if (r < 0)
            throw new SnowIdException(-r, "layout");
        return new Layout(v[0], (int) v[1], (int) v[2], (int) v[3]);
    }

    /** The segment's status: worker, state, deadline, headroom. */
    public Status status() throws SnowIdException {
        long[] v = new long[9];
        int r = status0(h, v);
        if (r < 0)
            throw new SnowIdException(-r, "status");
        return new Status((int) v[0], Status.State.of((int) v[1]), (int) v[1],
                v[2], v[3], v[4], v[5], v[6], (int) v[7], v[8] != 0);
    }

    /** Host-wide counts kept by libsnowid on its slow paths. */
    public HostStats hostStats() throws SnowIdException {
        long[] v = new long[6];
        int r = hostStats0(h, v);
        if (r < 0)
            throw new SnowIdException(-r, "host stats");
        return new HostStats(v[0], v[1], v[2], v[3], v[4], v[5]);
    }

    /**
     * The parts of {@code id} under the default layout (41/10/12 bits, epoch
     * 2025-01-01Z); {@code handle.layout().decode(id)} decodes with the
     * handle's layout.
     */
    public static Parts decode(long id) {
        return Layout.DEFAULT.decode(id);
    }

    /**
     * Frees the segment after the calls in progress on other threads return;
     * later calls throw EINVAL.  Closing twice is harmless.
     */
    @Override
    public void close() {
        closed = true;
        seg = null;
        close0(h);
    }

    /* the natives, registered by JNI_OnLoad of libsnowid_jni.so; instance
     * methods keep this handle reachable (so its Cleaner waits) while they run */
    private static native int open0(String instance, long[] ret);
    private native void close0(long h);
    private static native void free0(long h);
    private native long next0(long h);
    private native int nextBatch0(long h, long[] out, int off, int len);
    private native int nextUuid70(long h, long[] out);
    private native int setMaxWait0(long h, long usec);
    private native int layout0(long h, long[] out);
    private native int status0(long h, long[] out);
    private native int hostStats0(long h, long[] out);
    static native int layoutCheck0(long epochMs, int timeBits, int workerBits, int seqBits);
    static native int decodeUuid70(long epochMs, int timeBits, int workerBits, int seqBits,
            long msb, long lsb, long[] out);
    static native String errnoName0(int errno);
    static native String strerror0(int errno);
    /* the fast path's (FastPath.java) */
    private native int segment0(long h, long[] out);
    static native int shmLayout0(long[] out);
    static native long monotonicNs0();
}
