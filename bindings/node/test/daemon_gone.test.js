// SPDX-License-Identifier: MIT
// The daemon stops under an open handle: the wait budget decides how long a
// call waits before EAGAIN.  Stops the daemon: its own meson test.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { SnowId } = require('..');

function elapsedMs(fn) {
    const t = process.hrtime.bigint();
    let err = null;
    try {
        fn();
    } catch (e) {
        err = e;
    }
    return { ms: Number(process.hrtime.bigint() - t) / 1e6, err };
}

test('after the daemon stops, calls give EAGAIN within their budget', async () => {
    const s = new SnowId(undefined, { maxWaitUs: 0 });
    const st = s.status();
    assert.equal(st.state, 'leased');
    const eagain0 = s.hostStats().eagain;
    process.kill(st.daemonPid, 'SIGTERM');

    // a stopping daemon gives up its lease; the segment's IDs stay good
    // until its deadline (run with a short --window)
    assert.equal(typeof s.next(), 'bigint');
    const until = Date.now() + 60000;
    while (s.status().headroomMs >= 0) {
        assert.ok(Date.now() < until, 'the deadline did not pass within 60 s');
        await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.notEqual(s.status().state, 'leased');
    let err = elapsedMs(() => s.next()).err;
    assert.ok(err, 'an ID past the deadline');
    assert.equal(err.code, 'EAGAIN');
    assert.equal(err.errno, -11);
    assert.equal(err.syscall, 'snowid_next');
    assert.match(err.message, /^EAGAIN: /);

    // budget 0: at once
    let r = elapsedMs(() => s.next());
    assert.equal(r.err?.code, 'EAGAIN');
    assert.ok(r.ms < 50, `${r.ms} ms with no budget`);
    r = elapsedMs(() => s.nextBatch(8));
    assert.equal(r.err?.code, 'EAGAIN');
    assert.equal(r.err.syscall, 'snowid_next_batch');
    r = elapsedMs(() => s.nextUuid7());
    assert.equal(r.err?.code, 'EAGAIN');

    // a budget of 30 ms: waits it out, then EAGAIN
    s.setMaxWait(30000);
    r = elapsedMs(() => s.next());
    assert.equal(r.err?.code, 'EAGAIN');
    assert.ok(r.ms >= 29, `gave up after ${r.ms} ms of a 30 ms budget`);

    // nextAsync(): the threadpool tries for the async budget, then rejects
    s.setMaxWait(0, 60000);
    const t = process.hrtime.bigint();
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    await assert.rejects(s.nextAsync(), { code: 'EAGAIN', errno: -11, syscall: 'snowid_next' });
    await assert.rejects(s.nextBatchAsync(4), { code: 'EAGAIN', syscall: 'snowid_next_batch' });
    clearInterval(timer);
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    assert.ok(ms >= 119, `async gave up after ${ms} ms of 2 x 60 ms`);
    assert.ok(ticks > 0, 'the event loop ran while nextAsync() waited');

    assert.ok(s.hostStats().eagain > eagain0);
    s.close();
});

test('with no daemon, open fails', () => {
    assert.throws(() => new SnowId(), (e) => ['ENOENT', 'ECONNREFUSED'].includes(e.code) &&
        e.syscall === 'snowid_open' && e.errno < 0);
});
