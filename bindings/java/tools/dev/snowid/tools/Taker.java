// SPDX-License-Identifier: MIT
package dev.snowid.tools;

import dev.snowid.SnowId;
import dev.snowid.SnowIdException;
import java.io.BufferedOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.LockSupport;

/**
 * The Java taker of the conformance test, with the options of tests/taker.c:
 * -i INSTANCE -o PREFIX -t THREADS -n COUNT_PER_THREAD (or -c) -w WAIT_US
 * -b BATCH -r RATE_PER_THREAD_PER_S.  Java threads share one handle; odd
 * threads take batches of BATCH (when BATCH &gt; 1), even ones one ID a call;
 * each appends its IDs, 8 bytes native order, to PREFIX.THREAD.  It prints
 * {"started":true} once open, and on COUNT or SIGTERM/SIGINT one JSON line of
 * counts, then exits 0.
 */
public final class Taker {
    private static volatile boolean stop;
    private static String prefix = "ids";
    private static long perThread = Long.MAX_VALUE, waitUs = 100000, rate;
    private static int batch = 1;
    private static SnowId handle;

    private static final class Worker extends Thread {
        final int index;
        long ids, eagain, other, maxGapMs;
        String lastError = "";
        final Map<String, Long> byErrno = new TreeMap<>();

        Worker(int index) {
            super("taker-" + index);
            this.index = index;
        }

        @Override
        public void run() {
            int n = index % 2 == 1 ? batch : 1;
            long[] buf = new long[n];
            ByteBuffer bytes = ByteBuffer.allocate(8 * n).order(ByteOrder.nativeOrder());
            try (OutputStream out = new BufferedOutputStream(new FileOutputStream(prefix + "." + index), 1 << 16)) {
                long perMs = rate / 1000 + (rate % 1000 != 0 ? 1 : 0);
                long tick = nowMs(), inTick = 0, lastOk = nowMs();
                while (!stop && ids < perThread) {
                    if (rate != 0 && inTick >= perMs) {
                        long until = (tick + 1) * 1_000_000L;
                        for (long left; (left = until - System.nanoTime()) > 0;)
                            LockSupport.parkNanos(left);
                        tick = nowMs();
                        inTick = 0;
                    }
                    try {
                        if (n == 1)
                            buf[0] = handle.next();
                        else
                            handle.next(buf);
                    } catch (SnowIdException e) {
                        if (e.errnoName().equals("EAGAIN"))
                            eagain++;
                        else
                            other++;
                        lastError = e.errnoName();
                        byErrno.merge(lastError, 1L, Long::sum);
                        continue;
                    }
                    long now = nowMs();
                    maxGapMs = Math.max(maxGapMs, now - lastOk);
                    lastOk = now;
                    inTick += n;
                    bytes.clear();
                    bytes.asLongBuffer().put(buf);
                    out.write(bytes.array(), 0, 8 * n);
                    ids += n;
                }
            } catch (IOException e) {
                System.err.println("snowid-taker: " + prefix + "." + index + ": " + e.getMessage());
                Runtime.getRuntime().halt(3);
            }
        }
    }

    private static long nowMs() {
        return System.nanoTime() / 1_000_000L;
    }

    private static Worker[] workers;
    private static boolean reported;

    /* joins the workers and prints the counts, once */
    private static synchronized void finish() {
        if (reported)
            return;
        stop = true;
        long ids = 0, eagain = 0, other = 0, gap = 0;
        String last = "";
        Map<String, Long> byErrno = new TreeMap<>();
        for (Worker w : workers) {
            try {
                w.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            ids += w.ids;
            eagain += w.eagain;
            other += w.other;
            gap = Math.max(gap, w.maxGapMs);
            if (!w.lastError.isEmpty())
                last = w.lastError;
            w.byErrno.forEach((k, v) -> byErrno.merge(k, v, Long::sum));
        }
        StringBuilder sb = new StringBuilder();
        sb.append("{\"ids\":").append(ids).append(",\"eagain\":").append(eagain)
                .append(",\"other_errors\":").append(other).append(",\"last_error\":\"").append(last)
                .append("\",\"max_gap_ms\":").append(gap).append(",\"errors\":{");
        String sep = "";
        for (Map.Entry<String, Long> e : byErrno.entrySet()) {
            sb.append(sep).append('"').append(e.getKey()).append("\":").append(e.getValue());
            sep = ",";
        }
        sb.append("}}");
        System.out.println(sb);
        System.out.flush();
        reported = true;
        handle.close();
    }

    private static void usage() {
        System.err.println("usage: Taker -i INSTANCE -o PREFIX [-t THREADS] [-n PER_THREAD] "
                + "[-w WAIT_US] [-b BATCH] [-r RATE]");
        System.exit(2);
    }

    public static void main(String[] args) {
        String instance = null;
        int threads = 1;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.length() != 2 || a.charAt(0) != '-' || i + 1 >= args.length)
                usage();
            String v = args[++i];
            try {
                switch (a.charAt(1)) {
                case 'i' -> instance = v;
                case 'o' -> prefix = v;
                case 't' -> threads = Integer.parseInt(v);
                case 'n', 'c' -> perThread = Long.parseLong(v);
                case 'w' -> waitUs = Long.parseLong(v);
                case 'b' -> batch = Integer.parseInt(v);
                case 'r' -> rate = Long.parseLong(v);
                case 'g' -> { } /* taker.c's gap log: not kept here */
                default -> usage();
                }
            } catch (NumberFormatException e) {
                usage();
            }
        }
        if (threads < 1 || threads > 16 || batch < 1)
            System.exit(2);
        try {
            handle = SnowId.open(instance);
            handle.setMaxWaitMicros(waitUs);
        } catch (SnowIdException e) {
            System.err.println("snowid-taker: " + e.getMessage());
            System.exit(1);
        }
        workers = new Worker[threads];
        for (int i = 0; i < threads; i++)
            workers[i] = new Worker(i);
        /* SIGTERM and SIGINT run the hooks: stop, report, and exit 0 */
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            finish();
            Runtime.getRuntime().halt(0);
        }));
        for (Worker w : workers)
            w.start();
        System.out.println("{\"started\":true}");
        System.out.flush();
        for (Worker w : workers) {
            try {
                w.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        finish();
        System.exit(0);
    }
}
