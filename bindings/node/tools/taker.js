#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// The taker of the conformance test (the options of tests/taker.c): each of
// THREADS worker threads opens its own handle and takes IDs, one at a time
// (even indexes) or BATCH at a time (odd ones, when BATCH > 1), writing each
// as 8 bytes, native order, to PREFIX.<thread>, until COUNT per thread or
// SIGTERM; then one JSON line of counts.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const MODULE = path.join(__dirname, '..', 'index.js');

function usage() {
    process.stderr.write('usage: taker.js -i INSTANCE -o PREFIX [-t THREADS] [-n PER_THREAD] ' +
        '[-w WAIT_US] [-b BATCH] [-r RATE]\n');
    process.exit(2);
}

function parse(argv) {
    const o = { instance: undefined, prefix: 'ids', threads: 1, count: Infinity, waitUs: 100000,
        batch: 1, rate: 0 };
    // -c: the same as -n; -g (gap logs) is accepted and ignored
    const keys = { '-i': 'instance', '-o': 'prefix', '-t': 'threads', '-n': 'count', '-c': 'count',
        '-w': 'waitUs', '-b': 'batch', '-r': 'rate', '-g': 'gap' };
    for (let i = 0; i < argv.length; i++) {
        let a = argv[i], v;
        if (a.length > 2 && keys[a.slice(0, 2)]) {
            v = a.slice(2);
            a = a.slice(0, 2);
        } else {
            v = argv[++i];
        }
        const k = keys[a];
        if (!k || v === undefined)
            usage();
        o[k] = k === 'instance' || k === 'prefix' ? v : Number(v);
        if (Number.isNaN(o[k]) || o[k] < 0)
            usage();
    }
    if (!(o.threads >= 1 && o.threads <= 16) || !(o.batch >= 1))
        process.exit(2);
    return o;
}

function main() {
    const o = parse(process.argv.slice(2));
    const { SnowId } = require(MODULE);
    try {
        new SnowId(o.instance).close();
    } catch (e) {
        process.stderr.write(`taker.js: open: ${e.message}\n`);
        process.exit(1);
    }
    const stop = new Int32Array(new SharedArrayBuffer(4));
    const onSignal = () => {
        Atomics.store(stop, 0, 1);
        Atomics.notify(stop, 0);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);

    let ready = 0, done = 0;
    const total = { ids: 0, eagain: 0, other_errors: 0, last_error: '' };
    for (let t = 0; t < o.threads; t++) {
        const w = new Worker(__filename, { workerData: { ...o, index: t, stop } });
        w.on('message', (m) => {
            if (m.ready) {
                if (++ready === o.threads)
                    process.stdout.write('{"started":true}\n');
                return;
            }
            total.ids += m.ids;
            total.eagain += m.eagain;
            total.other_errors += m.other;
            if (m.lastError)
                total.last_error = m.lastError;
            if (++done === o.threads) {
                process.stdout.write(JSON.stringify(total) + '\n');
                process.exit(0);
            }
        });
        w.on('error', (e) => {
            process.stderr.write(`taker.js: thread ${t}: ${e.stack}\n`);
            process.exit(3);
        });
    }
}

function taker() {
    const o = workerData;
    const { SnowId } = require(MODULE);
    // a budget past 2^53 us (UINT64_MAX in taker.c) waits as long as it takes
    const s = new SnowId(o.instance, { maxWaitUs: o.waitUs > Number.MAX_SAFE_INTEGER ? Infinity : o.waitUs });
    const fd = fs.openSync(`${o.prefix}.${o.index}`, 'w');
    parentPort.postMessage({ ready: true });

    const batch = o.index % 2 === 1 && o.batch > 1 ? o.batch : 1;
    const ids = new BigUint64Array(batch);
    const out = new BigUint64Array(Math.max(65536, batch));
    const outBytes = new Uint8Array(out.buffer);
    let used = 0, taken = 0, eagain = 0, other = 0, lastError = '';
    const perMs = Math.ceil(o.rate / 1000);
    let tick = Math.floor(performance.now()), inTick = 0;
    const stop = o.stop;

    while (Atomics.load(stop, 0) === 0 && taken < o.count) {
        if (o.rate && inTick >= perMs) {
            const left = tick + 1 - performance.now();
            if (left > 0)
                Atomics.wait(stop, 0, 0, left);
            tick = Math.floor(performance.now());
            inTick = 0;
        }
        try {
            if (batch === 1) {
                out[used++] = s.next();
            } else {
                s.nextBatch(ids);
                out.set(ids, used);
                used += batch;
            }
        } catch (e) {
            if (e.code === 'EAGAIN')
                eagain++;
            else
                other++;
            lastError = e.code || String(e);
            continue;
        }
        taken += batch;
        inTick += batch;
        if (used + batch > out.length) {
            fs.writeSync(fd, outBytes, 0, used * 8);
            used = 0;
        }
    }
    fs.writeSync(fd, outBytes, 0, used * 8);
    fs.closeSync(fd);
    s.close();
    parentPort.postMessage({ ids: taken, eagain, other, lastError });
}

if (isMainThread)
    main();
else
    taker();
