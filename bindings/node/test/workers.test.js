// SPDX-License-Identifier: MIT
// The addon in worker_threads: each worker opens its own handle.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { Worker } = require('node:worker_threads');
const { SnowId } = require('..');

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { SnowId } = require(workerData.module);
// the budget of libsnowid: five threads on a busy machine can wait long
const s = new SnowId(undefined, { maxWaitUs: 100000 });
const ids = new BigUint64Array(workerData.count);
let i = 0;
while (i < ids.length) {
    if (workerData.batch > 1 && i + workerData.batch <= ids.length) {
        ids.set(s.nextBatch(workerData.batch), i);
        i += workerData.batch;
    } else {
        ids[i++] = s.next();
    }
}
const worker = s.status().worker;
s.close();
parentPort.postMessage({ ids, worker }, [ids.buffer]);
`;

function run(count, batch) {
    return new Promise((resolve, reject) => {
        const w = new Worker(WORKER, {
            eval: true,
            workerData: { module: require.resolve('..'), count, batch },
        });
        w.once('message', resolve);
        w.once('error', reject);
        w.once('exit', (code) => code && reject(new Error(`worker exited with ${code}`)));
    });
}

test('worker threads take unique IDs, increasing in each', async () => {
    const s = new SnowId(undefined, { maxWaitUs: 100000 });
    const worker = s.status().worker;
    const count = 50000;
    const pending = [run(count, 1), run(count, 64), run(count, 1), run(count, 7)];
    // the main thread takes too, meanwhile
    const mine = [];
    for (let i = 0; i < count; i++)
        mine.push(s.next());
    const results = await Promise.all(pending);
    const all = new Set(mine);
    for (const { ids, worker: w } of results) {
        assert.equal(ids.length, count);
        assert.equal(w, worker);
        for (let i = 1; i < ids.length; i++)
            assert.ok(ids[i] > ids[i - 1], `${ids[i]} after ${ids[i - 1]}`);
        for (const id of ids)
            all.add(id);
    }
    for (let i = 1; i < mine.length; i++)
        assert.ok(mine[i] > mine[i - 1]);
    assert.equal(all.size, 5 * count);
    s.close();
});

test('a worker that exits without closing its handle', async () => {
    const w = new Worker(`const { SnowId } = require(${JSON.stringify(require.resolve('..'))});
        const s = new SnowId(); s.next(); const t = s.next; t(); s.nextAsync();`, { eval: true });
    const code = await new Promise((resolve) => w.once('exit', resolve));
    assert.equal(code, 0);
});
