// SPDX-License-Identifier: MIT
package dev.snowid;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.function.Executable;

/** Runs under bindings/with_daemon.py: a real snowidd for $SNOWID_INSTANCE. */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SnowIdTest {
    static SnowIdException expectErrno(String name, Executable e) {
        SnowIdException ex = assertThrows(SnowIdException.class, e);
        assertEquals(name, ex.errnoName(), ex.getMessage());
        assertTrue(ex.getMessage().contains(name), ex.getMessage());
        assertTrue(ex.errno() > 0);
        return ex;
    }

    /* -Dsnowid.test.fast=on: next() must run without JNI here (the
     * binding-java test, with jdk.unsupported); off: through JNI (the
     * binding-java-jni test, a JVM limited to java.base) */
    @Test
    @Order(0)
    void fastPathAsConfigured() throws Exception {
        String want = System.getProperty("snowid.test.fast");
        SnowId s = SnowId.open();
        try {
            if ("on".equals(want)) {
                assertNull(SnowId.fastPathOff());
                assertTrue(s.fastPath());
            } else if ("off".equals(want)) {
                assertNotNull(SnowId.fastPathOff());
                assertFalse(s.fastPath());
            } else {
                fail("set -Dsnowid.test.fast=on or off");
            }
            long slow0 = SnowId.SLOW_CALLS.get(), prev = -1;
            for (int i = 0; i < 1000; i++) {
                long id = s.next();
                assertTrue(id > prev);
                prev = id;
            }
            long slow = SnowId.SLOW_CALLS.get() - slow0;
            if ("on".equals(want)) /* a few may wait at the ceiling, in libsnowid */
                assertTrue(slow < 500, slow + " of 1000 calls handed to JNI");
            else /* no fast path to hand anything over */
                assertEquals(0, slow);
            s.close();
            assertFalse(s.fastPath());
            expectErrno("EINVAL", s::next);
        } finally {
            s.close();
        }
    }

    @Test
    @Order(1)
    void nextIsIncreasingAndDecodes() throws Exception {
        try (SnowId s = SnowId.open()) {
            Layout l = s.layout();
            assertTrue(l.isValid());
            assertEquals(63, l.timeBits() + l.workerBits() + l.seqBits());
            Status st = s.status();
            assertEquals(Status.State.LEASED, st.state());
            assertTrue(st.headroomMs() > 0, "headroom " + st.headroomMs());
            assertTrue(st.daemonPid() > 0);
            long before = System.currentTimeMillis();
            long prev = -1;
            for (int i = 0; i < 200_000; i++) {
                long id = s.next();
                assertTrue(id > prev, "not increasing: " + prev + " then " + id);
                prev = id;
            }
            Parts p = l.decode(prev);
            assertEquals(st.worker(), p.worker());
            assertEquals(l.epochMs() + p.timeMs(), p.unixMs());
            long after = System.currentTimeMillis();
            /* ID time runs on the daemon's clock: allow its lead and some skew */
            assertTrue(p.unixMs() >= before - 2000 && p.unixMs() <= after + 2000,
                    "ID time " + p.unixMs() + " not near " + before + ".." + after);
            if (l.equals(Layout.DEFAULT))
                assertEquals(p, SnowId.decode(prev));
        }
    }

    @Test
    @Order(2)
    void threadsGetUniqueIncreasingIds() throws Exception {
        final int threads = 4, per = 100_000;
        long[][] got = new long[threads][per];
        AtomicReference<Throwable> failed = new AtomicReference<>();
        try (SnowId s = SnowId.open()) {
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                final long[] mine = got[t];
                final boolean batches = t % 2 == 1;
                Thread th = new Thread(() -> {
                    try {
                        long[] buf = new long[16];
                        for (int i = 0; i < per;) {
                            if (batches) {
                                s.next(buf);
                                System.arraycopy(buf, 0, mine, i, buf.length);
                                i += buf.length;
                            } else {
                                mine[i++] = s.next();
                            }
                        }
                    } catch (Throwable e) {
                        failed.set(e);
                    }
                });
                ts.add(th);
                th.start();
            }
            for (Thread th : ts)
                th.join();
        }
        if (failed.get() != null)
            fail(failed.get());
        Set<Long> all = new HashSet<>(threads * per * 2);
        for (long[] mine : got) {
            for (int i = 1; i < per; i++)
                assertTrue(mine[i] > mine[i - 1], "not increasing within a thread");
            for (long id : mine)
                assertTrue(all.add(id), "duplicate " + id);
        }
        assertEquals(threads * per, all.size());
    }

    @Test
    @Order(3)
    void batches() throws Exception {
        try (SnowId s = SnowId.open()) {
            int max = 1 << s.layout().seqBits();
            long[] big = new long[max];
            s.next(big);
            for (int i = 1; i < max; i++)
                assertTrue(big[i] > big[i - 1]);
            long one = s.next();
            assertTrue(one > big[max - 1]);

            long[] arr = new long[10];
            Arrays.fill(arr, -7);
            s.next(arr, 3, 4);
            for (int i = 0; i < 10; i++) {
                if (i < 3 || i >= 7)
                    assertEquals(-7, arr[i]);
                else
                    assertTrue(arr[i] > one && (i == 3 || arr[i] > arr[i - 1]));
            }

            long[] untouched = new long[max + 1];
            Arrays.fill(untouched, -1);
            expectErrno("EINVAL", () -> s.next(untouched));
            expectErrno("EINVAL", () -> s.next(new long[0]));
            expectErrno("EINVAL", () -> s.next(arr, 2, 0));
            long[] copy = new long[max + 1];
            Arrays.fill(copy, -1);
            assertArrayEquals(copy, untouched);
            assertThrows(IndexOutOfBoundsException.class, () -> s.next(arr, 8, 3));
            assertThrows(IndexOutOfBoundsException.class, () -> s.next(arr, -1, 2));
            assertThrows(NullPointerException.class, () -> s.next(null));
        }
    }

    @Test
    @Order(4)
    void uuid7() throws Exception {
        try (SnowId s = SnowId.open()) {
            Layout l = s.layout();
            int worker = s.status().worker();
            UUID prev = null;
            for (int i = 0; i < 10_000; i++) {
                UUID u = s.nextUuid7();
                assertEquals(7, u.version());
                assertEquals(2, u.variant());
                if (prev != null) {
                    /* RFC 9562 order: the halves as unsigned numbers */
                    int c = Long.compareUnsigned(u.getMostSignificantBits(), prev.getMostSignificantBits());
                    if (c == 0)
                        c = Long.compareUnsigned(u.getLeastSignificantBits(), prev.getLeastSignificantBits());
                    assertTrue(c > 0, prev + " then " + u);
                }
                prev = u;
            }
            Parts p = l.decodeUuid7(prev);
            assertEquals(worker, p.worker());
            assertTrue(Math.abs(p.unixMs() - System.currentTimeMillis()) < 5000);
            UUID v4 = UUID.randomUUID();
            expectErrno("EINVAL", () -> l.decodeUuid7(v4));
        }
    }

    @Test
    @Order(5)
    void decodeDefaultLayout() {
        long id = (5L << 22) | (3L << 12) | 7;
        Parts p = SnowId.decode(id);
        assertEquals(new Parts(5, Layout.EPOCH_DEFAULT_MS + 5, 3, 7), p);
        Parts q = new Layout(0, 43, 8, 12).decode((9L << 20) | (255L << 12) | 4095);
        assertEquals(new Parts(9, 9, 255, 4095), q);
        assertThrows(IllegalArgumentException.class, () -> SnowId.decode(-1));
        assertThrows(IllegalArgumentException.class, () -> new Layout(0, 40, 10, 12).decode(1));
        assertTrue(!new Layout(0, 31, 20, 12).isValid());
        assertTrue(Layout.DEFAULT.isValid());
    }

    @Test
    @Order(5)
    @SuppressWarnings("deprecation")
    void stateNames() {
        assertEquals(Status.State.RESTORED, Status.State.of(3));
        assertEquals(Status.State.STORE_FULL, Status.State.of(6));
        assertEquals(Status.State.UNKNOWN, Status.State.of(7));
        assertEquals(Status.State.UNKNOWN, Status.State.of(-1));
        /* the old name, kept until the next release */
        assertEquals(Status.State.STORE_FULL, Status.State.ETCD_FULL);
        assertEquals("STORE_FULL", Status.State.of(6).name());
    }

    @Test
    @Order(6)
    void statsAndWaitBudget() throws Exception {
        try (SnowId s = SnowId.open()) {
            HostStats a = s.hostStats();
            for (int i = 0; i < 1000; i++)
                s.next();
            HostStats b = s.hostStats();
            assertTrue(b.issued() - a.issued() >= 1000, a + " then " + b);
            s.setMaxWait(Duration.ofMillis(5));
            s.setMaxWait(Duration.ofSeconds(Long.MAX_VALUE)); /* as long as it takes */
            s.setMaxWaitMicros(0);
            s.next();
            assertThrows(IllegalArgumentException.class, () -> s.setMaxWait(Duration.ofMillis(-1)));
            assertThrows(IllegalArgumentException.class, () -> s.setMaxWaitMicros(-1));
        }
    }

    @Test
    @Order(7)
    void openErrors() {
        expectErrno("ENOENT", () -> SnowId.open("no-such-instance"));
        expectErrno("EINVAL", () -> SnowId.open("a/b"));
    }

    @Test
    @Order(8)
    void closedHandle() throws Exception {
        SnowId s = SnowId.open();
        s.next();
        s.close();
        s.close();
        SnowIdException e = expectErrno("EINVAL", s::next);
        assertTrue(e.getMessage().startsWith("snowid: next: EINVAL"), e.getMessage());
        expectErrno("EINVAL", () -> s.next(new long[4]));
        expectErrno("EINVAL", s::nextUuid7);
        expectErrno("EINVAL", s::layout);
        expectErrno("EINVAL", s::status);
        expectErrno("EINVAL", s::hostStats);
        expectErrno("EINVAL", () -> s.setMaxWaitMicros(1));
    }

    /* close() while other threads take IDs: they end with EINVAL (a call in
     * progress may give EAGAIN), never a crash */
    @Test
    @Order(9)
    void closeRacesNext() throws Exception {
        for (int round = 0; round < 20; round++) {
            SnowId s = SnowId.open();
            final int threads = 3;
            CountDownLatch running = new CountDownLatch(threads);
            AtomicLong taken = new AtomicLong();
            AtomicReference<Throwable> wrong = new AtomicReference<>();
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                final boolean batches = t == 1;
                Thread th = new Thread(() -> {
                    long[] buf = new long[8];
                    running.countDown();
                    try {
                        for (;;) {
                            try {
                                if (batches)
                                    s.next(buf);
                                else
                                    s.next();
                                taken.incrementAndGet();
                            } catch (SnowIdException e) {
                                /* a call that close() found running lost its budget */
                                if (!e.errnoName().equals("EAGAIN"))
                                    throw e;
                            }
                        }
                    } catch (SnowIdException e) {
                        if (!e.errnoName().equals("EINVAL"))
                            wrong.set(e);
                    } catch (Throwable e) {
                        wrong.set(e);
                    }
                });
                ts.add(th);
                th.start();
            }
            running.await();
            long seen = taken.get();
            while (taken.get() < seen + 1000)
                Thread.onSpinWait();
            s.close();
            for (Thread th : ts) {
                th.join(10_000);
                assertTrue(!th.isAlive(), "a thread still taking after close()");
            }
            if (wrong.get() != null)
                fail(wrong.get());
        }
    }

    /* last: stops the daemon.  Once the segment's deadline passes, a call
     * with no budget gives EAGAIN at once. */
    @Test
    @Order(100)
    void daemonGoneGivesEagain() throws Exception {
        try (SnowId s = SnowId.open()) {
            Status st = s.status();
            ProcessHandle daemon = ProcessHandle.of(st.daemonPid()).orElseThrow();
            s.setMaxWaitMicros(0);
            s.next();
            /* SIGTERM; it stays a zombie of the launcher, so what is waited
             * for is the EAGAIN itself */
            assertTrue(daemon.destroy());
            /* EAGAIN can come sooner (budget 0: the counter a ms ahead of
             * the clock); after the deadline it is all there is */
            long limit = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(st.headroomMs() + 10_000);
            while (s.status().headroomMs() >= 0) {
                assertTrue(System.nanoTime() < limit, "the deadline never passed");
                Thread.sleep(10);
            }
            expectErrno("EAGAIN", s::next);
            expectErrno("EAGAIN", () -> s.next(new long[2]));
            expectErrno("EAGAIN", s::nextUuid7);
            /* the socket is gone too */
            SnowIdException open = assertThrows(SnowIdException.class, SnowId::open);
            assertTrue(Set.of("ENOENT", "ECONNREFUSED").contains(open.errnoName()), open.getMessage());
        }
    }
}
