#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// The Node.js benchmark (run under bindings/with_daemon.py --http): ns per ID
// of snowid's next() and nextBatch(64), a textbook Snowflake in plain JS,
// crypto.randomUUID() and the HTTP API, each with 1 and 2 worker threads.
// (textbook-shared: one such generator shared by the threads.)
// Prints TSV lines: node <row> <threads> <ns_per_id> <ids_per_s>, each the
// median of 3 runs, the rows measured in turn.  An npm Snowflake package
// installed in bench/node_modules (never needed otherwise) adds a row.
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');
const path = require('node:path');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const MODULE = path.join(__dirname, '..', 'index.js');
const NPM_SNOWFLAKE = '@sapphire/snowflake';

// ---- the generators, each made in the thread that runs it ----

// Twitter's Snowflake as textbooks write it: ms since an epoch, then the
// worker, then the sequence, cut as the daemon's IDs are (41/10/12 by
// default), so that both meet the same ceiling; a spin to the next ms when
// the sequence runs out, the clock read at each ID.  One per thread (worker
// = thread).
const CUT = (() => {
    const { SnowId } = require(MODULE);
    const s = new SnowId();
    const l = s.layout;
    s.close();
    return { sb: l.seqBits, wb: l.workerBits };
})();
const SEQ_MASK = 2 ** CUT.sb - 1;
const SHIFT_MS = BigInt(CUT.wb + CUT.sb), SHIFT_W = BigInt(CUT.sb);

function textbook(worker) {
    const EPOCH = 1735689600000;
    let lastMs = -1, seq = 0;
    return () => {
        let now = Date.now() - EPOCH;
        if (now < lastMs)
            now = lastMs; // the clock stepped back: stay on the last ms
        if (now === lastMs) {
            seq = (seq + 1) & SEQ_MASK;
            if (seq === 0) {
                while ((now = Date.now() - EPOCH) <= lastMs)
                    ;
            }
        } else {
            seq = 0;
        }
        lastMs = now;
        return (BigInt(now) << SHIFT_MS) | (BigInt(worker) << SHIFT_W) | BigInt(seq);
    };
}

// The same generator shared by the threads, as Go's and Java's textbooks
// are: (ms << seq_bits | sequence) in a SharedArrayBuffer, taken by compare and
// swap.  Not a required row: Node's threads usually each run their own.
function textbookShared(state, worker) {
    const EPOCH = 1735689600000;
    return () => {
        for (;;) {
            const old = Atomics.load(state, 0);
            const now = Date.now() - EPOCH;
            let next;
            if (now <= Number(old >> SHIFT_W)) {
                if ((old & BigInt(SEQ_MASK)) === BigInt(SEQ_MASK))
                    continue; // the sequence ran out: spin to the next ms
                next = old + 1n;
            } else {
                next = BigInt(now) << SHIFT_W;
            }
            if (Atomics.compareExchange(state, 0, old, next) === old)
                return ((next >> SHIFT_W) << SHIFT_MS) | (BigInt(worker) << SHIFT_W) |
                       (next & BigInt(SEQ_MASK));
        }
    };
}

function makeSync(row, thread) {
    if (row === 'snowid' || row === 'snowid-batch64') {
        const { SnowId } = require(MODULE);
        // libsnowid's budget: the ceiling's waits on a busy machine
        const s = new SnowId(undefined, { maxWaitUs: 100000 });
        if (row === 'snowid')
            return { gen: () => s.next(), per: 1, close: () => s.close() };
        const a = new BigUint64Array(64);
        return { gen: () => s.nextBatch(a)[63], per: 64, close: () => s.close() };
    }
    if (row === 'textbook')
        return { gen: textbook(thread + 1), per: 1 };
    if (row === 'textbook-shared')
        return { gen: textbookShared(new BigInt64Array(workerData.shared), 1), per: 1 };
    if (row === 'uuid')
        return { gen: () => crypto.randomUUID(), per: 1 };
    if (row === `npm-${NPM_SNOWFLAKE}`) {
        const { Snowflake } = require(require.resolve(NPM_SNOWFLAKE, { paths: [__dirname] }));
        const sf = new Snowflake(1735689600000n);
        const workerId = BigInt(thread + 1);
        return { gen: () => sf.generate({ workerId }), per: 1 };
    }
    return null;
}

// Runs gen until the deadline, checking the clock every 256 calls.
function runSync(g, untilMs) {
    let calls = 0, errors = 0, last, lastError = '';
    const gen = g.gen;
    while (performance.now() < untilMs) {
        for (let i = 0; i < 256; i++) {
            try {
                last = gen();
            } catch (e) {
                errors++;
                lastError = e.code || String(e);
            }
        }
        calls += 256;
    }
    return { ids: (calls - errors) * g.per, errors, lastError, last: String(last) };
}

// POST /v1/ids?count=1 on one keep-alive connection, one request at a time.
async function runHttp(untilMs) {
    const url = new URL('/v1/ids?count=1', process.env.SNOWID_HTTP);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = () => new Promise((resolve, reject) => {
        const req = http.request(url, { method: 'POST', agent }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d) => body += d);
            res.on('end', () => {
                if (res.statusCode !== 200)
                    return reject(new Error(`HTTP ${res.statusCode}: ${body}`));
                resolve(BigInt(JSON.parse(body).ids[0]));
            });
        });
        req.on('error', reject);
        req.end();
    });
    let ids = 0, errors = 0, last, lastError = '';
    await post(); // the connection
    while (performance.now() < untilMs) {
        try {
            last = await post();
            ids++;
        } catch (e) {
            errors++;
            lastError = e.code || e.message;
        }
    }
    agent.destroy();
    return { ids, errors, lastError, last: String(last) };
}

// ---- worker side: one measurement per message ----

function workerMain() {
    const go = new Int32Array(workerData.go);
    parentPort.on('message', async ({ row, seconds, round }) => {
        const g = row === 'http' ? null : makeSync(row, workerData.thread);
        if (g) { // warm up
            const warm = performance.now() + 50;
            runSync(g, warm);
        }
        parentPort.postMessage({ ready: true });
        Atomics.wait(go, 0, round - 1); // the main thread starts all at once
        const t0 = performance.timeOrigin + performance.now();
        const until = performance.now() + seconds * 1000;
        const r = g ? runSync(g, until) : await runHttp(until);
        const t1 = performance.timeOrigin + performance.now();
        if (g && g.close)
            g.close();
        parentPort.postMessage({ ...r, t0, t1 });
    });
}

// ---- main: the rows in turn, 3 rounds, medians ----

function median(a) {
    const s = [...a].sort((x, y) => x - y);
    return s[s.length >> 1];
}

async function main() {
    let seconds = 2;
    const argv = process.argv.slice(2);
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === '--seconds')
            seconds = Number(argv[++i]);
        else if (argv[i].startsWith('--seconds='))
            seconds = Number(argv[i].slice(10));
        else {
            process.stderr.write('usage: bench.js [--seconds S]\n');
            process.exit(2);
        }
    }
    if (!(seconds > 0))
        process.exit(2);
    const rows = ['snowid', 'snowid-batch64', 'textbook', 'textbook-shared', 'uuid'];
    try {
        require.resolve(NPM_SNOWFLAKE, { paths: [__dirname] });
        rows.push(`npm-${NPM_SNOWFLAKE}`);
    } catch (e) {
        process.stderr.write(`bench.js: ${NPM_SNOWFLAKE} not installed in bench/node_modules: no npm row\n`);
    }
    if (process.env.SNOWID_HTTP)
        rows.push('http');
    else
        process.stderr.write('bench.js: no SNOWID_HTTP: no http row\n');

    const goBuf = new SharedArrayBuffer(4);
    const shared = new SharedArrayBuffer(8);
    const go = new Int32Array(goBuf);
    const workers = [0, 1].map((thread) => new Worker(__filename, { workerData: { thread, go: goBuf, shared } }));
    for (const w of workers)
        w.on('error', (e) => {
            process.stderr.write(`bench.js: ${e.stack}\n`);
            process.exit(1);
        });
    let round = 0;
    async function measure(row, threads) {
        const ws = workers.slice(0, threads);
        round++;
        const msg = { row, seconds, round };
        const done = [];
        await Promise.all(ws.map((w) => {
            let resolveDone;
            done.push(new Promise((r) => resolveDone = r));
            return new Promise((resolveReady) => {
                const on = (m) => {
                    if (m.ready) {
                        resolveReady();
                    } else {
                        w.off('message', on);
                        resolveDone(m);
                    }
                };
                w.on('message', on);
                w.postMessage(msg);
            });
        }));
        Atomics.store(go, 0, round);
        Atomics.notify(go, 0);
        const res = await Promise.all(done);
        const ids = res.reduce((a, r) => a + r.ids, 0);
        const errors = res.reduce((a, r) => a + r.errors, 0);
        if (errors)
            process.stderr.write(`bench.js: ${row} x${threads}: ${errors} errors (${res.map((r) => r.lastError).join(' ')})\n`);
        const wallNs = (Math.max(...res.map((r) => r.t1)) - Math.min(...res.map((r) => r.t0))) * 1e6;
        return wallNs / ids;
    }

    const results = new Map();
    for (let rep = 0; rep < 3; rep++) {
        for (const row of rows) {
            for (const threads of [1, 2]) {
                const key = `${row}\t${threads}`;
                if (!results.has(key))
                    results.set(key, []);
                results.get(key).push(await measure(row, threads));
            }
        }
    }
    for (const [key, v] of results) {
        const ns = median(v);
        process.stdout.write(`node\t${key}\t${ns.toFixed(1)}\t${Math.round(1e9 / ns)}\n`);
    }
    for (const w of workers)
        await w.terminate();
}

if (isMainThread)
    main();
else
    workerMain();
