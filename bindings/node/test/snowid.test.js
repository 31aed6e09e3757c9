// SPDX-License-Identifier: MIT
// The client against a real snowidd (run under bindings/with_daemon.py).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { SnowId, decode, defaultLayout } = require('..');

function assertErrno(fn, code, syscall) {
    assert.throws(fn, (e) => {
        assert.ok(e instanceof Error);
        assert.equal(e.code, code);
        assert.equal(e.errno, -require('node:os').constants.errno[code]);
        if (syscall)
            assert.equal(e.syscall, syscall);
        assert.match(e.message, new RegExp(`^${code}: .*, ${e.syscall}$`));
        return true;
    });
}

function assertIncreasing(ids, after = -1n) {
    let prev = after;
    for (const id of ids) {
        assert.equal(typeof id, 'bigint');
        assert.ok(id > prev, `${id} after ${prev}`);
        prev = id;
    }
    return prev;
}

// Rebuilds an ID from its parts under a layout.
function encode(p, l) {
    return (BigInt(p.timeMs) << BigInt(l.workerBits + l.seqBits)) |
        (BigInt(p.worker) << BigInt(l.seqBits)) | BigInt(p.sequence);
}

test('next() gives increasing unique BigInts', () => {
    const s = new SnowId();
    const ids = [];
    for (let i = 0; i < 200000; i++)
        ids.push(s.next());
    assertIncreasing(ids);
    assert.equal(new Set(ids).size, ids.length);
    s.close();
});

test('nextString() gives the decimal of the next ID', () => {
    const s = SnowId.open(process.env.SNOWID_INSTANCE);
    const a = s.next();
    const str = s.nextString();
    const b = s.next();
    assert.match(str, /^[1-9][0-9]*$/);
    assertIncreasing([a, BigInt(str), b]);
    s.close();
});

test('nextBatch(n) and nextBatch(array)', () => {
    const s = new SnowId();
    const before = s.next();
    const a = s.nextBatch(64);
    assert.ok(a instanceof BigUint64Array);
    assert.equal(a.length, 64);
    let last = assertIncreasing(a, before);
    const buf = new BigUint64Array(100);
    assert.equal(s.nextBatch(buf), buf);
    last = assertIncreasing(buf, last);
    // a view into a larger buffer: only the view is written
    const big = new BigUint64Array(10);
    const view = new BigUint64Array(big.buffer, 16, 5);
    s.nextBatch(view);
    assert.equal(big[0], 0n);
    assert.equal(big[1], 0n);
    assert.equal(big[7], 0n);
    last = assertIncreasing(view, last);
    const full = s.nextBatch(2 ** s.layout.seqBits);
    assertIncreasing(full, last);
    s.close();
});

test('nextBatch errors: 0 and too big are EINVAL, bad arguments are TypeError/RangeError', () => {
    const s = new SnowId();
    assertErrno(() => s.nextBatch(0), 'EINVAL', 'snowid_next_batch');
    assertErrno(() => s.nextBatch(new BigUint64Array(0)), 'EINVAL', 'snowid_next_batch');
    assertErrno(() => s.nextBatch(2 ** s.layout.seqBits + 1), 'EINVAL', 'snowid_next_batch');
    assertErrno(() => s.nextBatch(new BigUint64Array(2 ** s.layout.seqBits + 1)), 'EINVAL');
    assert.throws(() => s.nextBatch(new BigInt64Array(4)), TypeError);
    assert.throws(() => s.nextBatch('4'), TypeError);
    assert.throws(() => s.nextBatch(), TypeError);
    assert.throws(() => s.nextBatch(-1), RangeError);
    assert.throws(() => s.nextBatch(1.5), RangeError);
    s.close();
});

test('decode() matches the layout, the status and the clock', () => {
    const s = new SnowId();
    const l = s.layout;
    assert.deepEqual(l, defaultLayout());
    const st = s.status();
    const t0 = Date.now();
    const id = s.next();
    const t1 = Date.now();
    for (const p of [s.decode(id), SnowId.decode(id), decode(id), decode(id.toString()), decode(id, l)]) {
        assert.equal(p.worker, st.worker);
        assert.equal(p.unixMs, p.timeMs + l.epochMs);
        assert.ok(p.sequence < 2 ** l.seqBits);
        // ID time is the daemon's (slewed) clock: within a second of ours
        assert.ok(p.unixMs >= t0 - 1000 && p.unixMs <= t1 + 1000, `${p.unixMs} vs ${t0}..${t1}`);
        assert.equal(encode(p, l), id);
    }
    const n = 2n ** 40n + 12345n;
    assert.deepEqual(decode(Number(n)), decode(n));
});

test('decode() with a layout, and its errors', () => {
    const l = { epochMs: 1700000000000, timeBits: 33, workerBits: 10, seqBits: 20 };
    const id = (5n << 30n) | (7n << 20n) | 9n;
    assert.deepEqual(decode(id, l), { timeMs: 5, unixMs: 1700000000005, worker: 7, sequence: 9 });
    assert.deepEqual(decode(id, { seqBits: 12, workerBits: 10, timeBits: 41 }), decode(id));
    assertErrno(() => decode(1n, { timeBits: 10 }), 'EINVAL', 'snowid_layout_check');
    assertErrno(() => decode(2n ** 63n), 'ERANGE', 'snowid_decode');
    assert.throws(() => decode(-1n), RangeError);
    assert.throws(() => decode(2n ** 64n), RangeError);
    assert.throws(() => decode('12a'), TypeError);
    assert.throws(() => decode('99999999999999999999999'), TypeError);
    assert.throws(() => decode(''), TypeError);
    assert.throws(() => decode(1.5), RangeError);
    assert.throws(() => decode({}), TypeError);
    assert.throws(() => decode(1n, 'layout'), TypeError);
});

test('status() and hostStats()', () => {
    const s = new SnowId();
    const st = s.status();
    assert.equal(st.state, 'leased');
    assert.equal(st.stateCode, 1);
    assert.ok(st.worker >= 0 && st.worker < 2 ** s.layout.workerBits);
    assert.ok(st.headroomMs > 0);
    assert.equal(st.deadlineUnixMs, st.deadlineMs + s.layout.epochMs);
    assert.equal(st.generation % 2, 0);
    assert.ok(st.daemonPid > 0);
    assert.equal(typeof st.offsetNs, 'bigint');
    assert.equal(typeof st.tscClock, 'boolean');
    const h0 = s.hostStats();
    for (const k of ['issued', 'waitsCeiling', 'waitsDeadline', 'waitsSwitch', 'eagain', 'dropped'])
        assert.equal(typeof h0[k], 'bigint', k);
    s.nextBatch(1000);
    for (let i = 0; i < 1000; i++)
        s.next();
    const h1 = s.hostStats();
    assert.ok(h1.issued - h0.issued >= 2000n, `${h0.issued} -> ${h1.issued}`);
    s.close();
});

test('nextUuid7() gives increasing RFC 9562 version 7 UUIDs', () => {
    const s = new SnowId();
    const t0 = Date.now();
    const u = [];
    for (let i = 0; i < 10000; i++)
        u.push(s.nextUuid7());
    for (const x of u)
        assert.match(x, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (let i = 1; i < u.length; i++)
        assert.ok(u[i] > u[i - 1], `${u[i]} after ${u[i - 1]}`);
    const ms = parseInt(u[0].slice(0, 8) + u[0].slice(9, 13), 16);
    assert.ok(Math.abs(ms - t0) < 1000, `${ms} vs ${t0}`);
    s.close();
});

test('open errors: a missing instance is ENOENT, a bad name EINVAL', () => {
    assertErrno(() => new SnowId('no-such-instance'), 'ENOENT', 'snowid_open');
    assertErrno(() => new SnowId('../x'), 'EINVAL', 'snowid_open');
    assert.throws(() => new SnowId(5), TypeError);
    assert.throws(() => new SnowId(undefined, 5), TypeError);
    assert.throws(() => new SnowId(undefined, { maxWaitUs: -1 }), RangeError);
});

test('a closed handle gives EINVAL', async () => {
    const s = new SnowId();
    s.next();
    assert.equal(s.closed, false);
    s.close();
    assert.equal(s.closed, true);
    s.close();
    assertErrno(() => s.next(), 'EINVAL', 'snowid_next');
    assertErrno(() => s.nextString(), 'EINVAL', 'snowid_next');
    assertErrno(() => s.nextBatch(4), 'EINVAL', 'snowid_next_batch');
    assertErrno(() => s.nextUuid7(), 'EINVAL', 'snowid_next_uuid7');
    assertErrno(() => s.layout, 'EINVAL');
    assertErrno(() => s.status(), 'EINVAL');
    assertErrno(() => s.hostStats(), 'EINVAL');
    assertErrno(() => s.setMaxWait(0), 'EINVAL');
    await assert.rejects(s.nextAsync(), { code: 'EINVAL', errno: -22 });
    await assert.rejects(s.nextBatchAsync(2), { code: 'EINVAL' });
});

test('setMaxWait() takes Numbers, BigInts and Infinity', () => {
    const s = new SnowId(undefined, { maxWaitUs: 0, asyncMaxWaitUs: 1000 });
    s.next();
    s.setMaxWait(5n);
    s.setMaxWait(Infinity);
    s.setMaxWait(0, 5000);
    s.next();
    assert.throws(() => s.setMaxWait(-1), RangeError);
    assert.throws(() => s.setMaxWait('1'), TypeError);
    assert.throws(() => s.setMaxWait(), TypeError);
    s.close();
});

test('a method outlives its object (the handle is reference-counted)', { skip: !global.gc }, () => {
    let next = new SnowId().next;
    for (let i = 0; i < 100; i++)
        new SnowId().next();
    global.gc();
    const a = next();
    const b = next();
    assert.ok(b > a);
    next = null;
    global.gc();
});

test('the ES module', async () => {
    const m = await import('../index.mjs');
    assert.equal(m.SnowId, SnowId);
    assert.equal(m.decode, decode);
    const s = new m.SnowId();
    assert.equal(typeof s.next(), 'bigint');
    s.close();
});
