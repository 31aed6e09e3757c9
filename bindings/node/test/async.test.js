// SPDX-License-Identifier: MIT
// nextAsync() and nextBatchAsync() while the daemon is up.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { SnowId } = require('..');

test('nextAsync() resolves to increasing BigInts', async () => {
    const s = new SnowId();
    const a = await s.nextAsync();
    const b = s.next();
    const c = await s.nextAsync();
    assert.equal(typeof a, 'bigint');
    assert.ok(a < b && b < c);
    s.close();
});

test('many nextAsync() and nextBatchAsync() at once are unique', async () => {
    const s = new SnowId(undefined, { maxWaitUs: 0 });
    const ps = [];
    for (let i = 0; i < 20000; i++)
        ps.push(i % 10 ? s.nextAsync() : s.nextBatchAsync(16));
    const out = await Promise.all(ps);
    const all = new Set();
    for (const v of out) {
        if (typeof v === 'bigint') {
            all.add(v);
        } else {
            assert.ok(v instanceof BigUint64Array);
            assert.equal(v.length, 16);
            for (let i = 1; i < v.length; i++)
                assert.ok(v[i] > v[i - 1]);
            for (const x of v)
                all.add(x);
        }
    }
    assert.equal(all.size, 18000 + 2000 * 16);
    s.close();
});

test('nextBatchAsync() errors reject', async () => {
    const s = new SnowId();
    await assert.rejects(s.nextBatchAsync(0), { code: 'EINVAL', errno: -22, syscall: 'snowid_next_batch' });
    await assert.rejects(s.nextBatchAsync(2 ** s.layout.seqBits + 1), { code: 'EINVAL' });
    await assert.rejects(s.nextBatchAsync(-1), RangeError);
    const p = s.nextAsync();
    s.close();
    assert.equal(typeof await p, 'bigint');
});
