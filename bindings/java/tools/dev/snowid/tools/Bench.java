// SPDX-License-Identifier: MIT
package dev.snowid.tools;

import dev.snowid.Layout;
import dev.snowid.SnowId;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java benchmark, run under bindings/with_daemon.py --http:
 * Bench [--seconds S].  Prints "java ROW THREADS NS_PER_ID IDS_PER_S" lines
 * (tab-separated) for the rows snowid (next()), snowid-batch64 (next(long[64])),
 * textbook (an AtomicLong CAS Snowflake on System.currentTimeMillis(), with
 * the daemon's layout: 41/10/12 bits by default), uuid (UUID.randomUUID()),
 * http (POST $SNOWID_HTTP/v1/ids?count=1 over one keep-alive connection a
 * thread, HttpURLConnection) and http-httpclient (the same with
 * java.net.http.HttpClient), at 1 and 2 threads: the median of 3 runs,
 * the rows taking turns in slices of a tenth of a run, after a warm-up of
 * each (JIT).
 *
 * <p>With 12 sequence bits every Snowflake row is capped at 4096 IDs a ms
 * (244 ns an ID); a daemon with --seq-bits 20 (and --time-bits 35, --worker-bits 8, --epoch
 * recent) measures the calls instead.
 */
public final class Bench {
    /** One thread's work: takes IDs until told to stop; returns how many. */
    interface Body {
        long run(long deadlineNs) throws Exception;
    }

    interface Row {
        Body body(int thread) throws Exception;
    }

    static volatile long sink;

    /* the textbook Snowflake, cut as the daemon's IDs are (by default 41 bits
     * of ms, 10 of worker, 12 of sequence) */
    static long tbEpoch;
    static int tbShift, tbWorkerShift;
    static long tbSeqMask;
    static final AtomicLong textbookState = new AtomicLong();

    static long textbookNext() {
        for (;;) {
            long now = System.currentTimeMillis() - tbEpoch;
            long prev = textbookState.get();
            long next;
            if (now > prev >>> tbShift) {
                next = now << tbShift | 1L << tbWorkerShift;
            } else {
                if ((prev & tbSeqMask) == tbSeqMask)
                    continue; /* the ms is spent: wait for the clock */
                next = prev + 1;
            }
            if (textbookState.compareAndSet(prev, next))
                return next;
        }
    }

    static final int CHECK_EVERY = 256;

    /* one loop a row, so that each call site stays monomorphic */
    static Body snowidBody() {
        return deadline -> {
            long n = 0, x = 0;
            do {
                for (int i = 0; i < CHECK_EVERY; i++)
                    x ^= handle.next();
                n += CHECK_EVERY;
            } while (System.nanoTime() < deadline);
            sink ^= x;
            return n;
        };
    }

    static Body textbookBody() {
        return deadline -> {
            long n = 0, x = 0;
            do {
                for (int i = 0; i < CHECK_EVERY; i++)
                    x ^= textbookNext();
                n += CHECK_EVERY;
            } while (System.nanoTime() < deadline);
            sink ^= x;
            return n;
        };
    }

    static Body uuidBody() {
        return deadline -> {
            long n = 0, x = 0;
            do {
                for (int i = 0; i < CHECK_EVERY; i++)
                    x ^= UUID.randomUUID().getLeastSignificantBits();
                n += CHECK_EVERY;
            } while (System.nanoTime() < deadline);
            sink ^= x;
            return n;
        };
    }

    static SnowId handle;

    static Body batchBody() {
        long[] buf = new long[64];
        return deadline -> {
            long n = 0, x = 0;
            do {
                for (int i = 0; i < CHECK_EVERY / 16; i++) {
                    handle.next(buf);
                    x ^= buf[63];
                }
                n += 64 * (CHECK_EVERY / 16);
            } while (System.nanoTime() < deadline);
            sink ^= x;
            return n;
        };
    }

    static long firstId(String b) {
        int q = b.indexOf('"', b.indexOf('['));
        return Long.parseLong(b, q + 1, b.indexOf('"', q + 1), 10);
    }

    /* java.net.http.HttpClient, HTTP/1.1: one connection a client, kept alive */
    static final HttpClient[] clients = new HttpClient[2];

    static Body httpClientBody(String base, int thread) {
        /* one client a thread for the whole run: a client's idle connections
         * stay open until it is collected */
        if (clients[thread] == null)
            clients[thread] = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        HttpClient client = clients[thread];
        HttpRequest req = HttpRequest.newBuilder(URI.create(base + "/v1/ids?count=1"))
                .POST(HttpRequest.BodyPublishers.noBody()).build();
        return deadline -> {
            long n = 0, x = 0;
            do {
                HttpResponse<String> r;
                try {
                    r = client.send(req, HttpResponse.BodyHandlers.ofString());
                } catch (IOException e) {
                    /* the server closed an idle connection as it was reused */
                    r = client.send(req, HttpResponse.BodyHandlers.ofString());
                }
                if (r.statusCode() != 200)
                    throw new IllegalStateException("HTTP " + r.statusCode() + ": " + r.body());
                x ^= firstId(r.body());
                n++;
            } while (System.nanoTime() < deadline);
            sink ^= x;
            return n;
        };
    }

    /* HttpURLConnection: the JDK keeps the connection alive for the next
     * request once a response is read to its end */
    static Body httpUrlBody(String base) throws Exception {
        URL url = new URL(base + "/v1/ids?count=1");
        return deadline -> {
            long n = 0, x = 0;
            byte[] buf = new byte[4096];
            do {
                HttpURLConnection c = (HttpURLConnection) url.openConnection();
                c.setRequestMethod("POST");
                int code = c.getResponseCode();
                if (code != 200)
                    throw new IllegalStateException("HTTP " + code);
                int len = 0;
                try (InputStream in = c.getInputStream()) {
                    for (int r; (r = in.read(buf, len, buf.length - len)) > 0;)
                        len += r;
                }
                x ^= firstId(new String(buf, 0, len, StandardCharsets.US_ASCII));
                n++;
            } while (System.nanoTime() < deadline);
            sink ^= x;
            return n;
        };
    }

    /* {wall ns, total IDs} of all threads taking IDs for about seconds */
    static long[] measure(Row row, int threads, double seconds) throws Exception {
        /* the garbage of the HTTP rows is collected now, not in the next row's time */
        System.gc();
        Body[] bodies = new Body[threads];
        for (int t = 0; t < threads; t++)
            bodies[t] = row.body(t);
        long[] counts = new long[threads];
        Exception[] failed = new Exception[1];
        long[] times = new long[2];
        CyclicBarrier start = new CyclicBarrier(threads, () -> {
            times[0] = System.nanoTime();
        });
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int i = t;
            Thread th = new Thread(() -> {
                try {
                    start.await();
                    counts[i] = bodies[i].run(times[0] + (long) (seconds * 1e9));
                } catch (Exception e) {
                    synchronized (failed) {
                        failed[0] = e;
                    }
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts)
            th.join();
        long end = System.nanoTime();
        if (failed[0] != null)
            throw failed[0];
        return new long[] {end - times[0], Arrays.stream(counts).sum()};
    }

    public static void main(String[] args) throws Exception {
        double seconds = 2;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--seconds") && i + 1 < args.length) {
                seconds = Double.parseDouble(args[++i]);
            } else {
                System.err.println("usage: Bench [--seconds S]");
                System.exit(2);
            }
        }
        handle = SnowId.open();
        Layout layout = handle.layout();
        tbEpoch = layout.epochMs();
        tbShift = layout.workerBits() + layout.seqBits();
        tbWorkerShift = layout.seqBits();
        tbSeqMask = (1L << layout.seqBits()) - 1;
        System.err.printf("bench: layout %d/%d/%d bits (at most %d IDs a ms)%n", layout.timeBits(),
                layout.workerBits(), layout.seqBits(), 1L << layout.seqBits());
        String base = System.getenv("SNOWID_HTTP");
        String[] names = {"snowid", "snowid-batch64", "textbook", "uuid", "http", "http-httpclient"};
        Row[] rows = {
            t -> snowidBody(),
            t -> batchBody(),
            t -> textbookBody(),
            t -> uuidBody(),
            t -> httpUrlBody(base),
            t -> httpClientBody(base, t),
        };
        int[] threadCounts = {1, 2};
        boolean[] skip = new boolean[rows.length];
        if (base == null || base.isEmpty()) {
            System.err.println("bench: no $SNOWID_HTTP: no http row");
            skip[4] = skip[5] = true;
        }
        /* warm-up: the JIT compiles each row's loop before it is measured */
        for (int r = 0; r < rows.length; r++)
            if (!skip[r])
                for (int threads : threadCounts)
                    measure(rows[r], threads, Math.min(1.0, seconds / 2));
        /* each run of a row is SLICES slices, the rows taking turns slice by
         * slice, so that a burst of load elsewhere falls on all of them */
        final int slices = 10;
        long[][][][] acc = new long[rows.length][threadCounts.length][3][2];
        for (int run = 0; run < 3; run++)
            for (int slice = 0; slice < slices; slice++)
                for (int r = 0; r < rows.length; r++)
                    for (int c = 0; c < threadCounts.length; c++)
                        if (!skip[r]) {
                            long[] m = measure(rows[r], threadCounts[c], seconds / slices);
                            acc[r][c][run][0] += m[0];
                            acc[r][c][run][1] += m[1];
                        }
        for (int r = 0; r < rows.length; r++) {
            for (int c = 0; c < threadCounts.length; c++) {
                if (skip[r])
                    continue;
                double[] v = new double[3];
                for (int run = 0; run < 3; run++)
                    v[run] = (double) acc[r][c][run][0] / acc[r][c][run][1];
                Arrays.sort(v);
                double ns = v[1];
                System.out.printf("java\t%s\t%d\t%.1f\t%.0f%n", names[r], threadCounts[c], ns, 1e9 / ns);
            }
        }
        handle.close();
    }
}
