// SPDX-License-Identifier: MIT
// tools/taker.js: what the conformance test reads from it.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const TAKER = path.join(__dirname, '..', 'tools', 'taker.js');

function runTaker(args, onStarted) {
    return new Promise((resolve, reject) => {
        const p = spawn(process.execPath, [TAKER, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        p.stdout.on('data', (d) => {
            out += d;
            if (onStarted && out.includes('{"started":true}\n')) {
                onStarted(p);
                onStarted = null;
            }
        });
        p.on('error', reject);
        p.on('exit', (code) => resolve({ code, lines: out.split('\n').filter(Boolean).map((l) => JSON.parse(l)) }));
    });
}

function readIds(file) {
    const b = fs.readFileSync(file);
    return new BigUint64Array(b.buffer, b.byteOffset, b.length / 8);
}

test('the taker takes COUNT per thread, batches on odd threads', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'snowid-node-taker-'));
    const prefix = path.join(dir, 'ids');
    const r = await runTaker(['-i', process.env.SNOWID_INSTANCE, '-o', prefix, '-t', '3', '-n', '20000',
        '-b', '50', '-w', '100000']);
    assert.equal(r.code, 0);
    assert.deepEqual(r.lines[0], { started: true });
    assert.deepEqual(r.lines[1], { ids: 60000, eagain: 0, other_errors: 0, last_error: '' });
    const all = new Set();
    for (let t = 0; t < 3; t++) {
        const ids = readIds(`${prefix}.${t}`);
        assert.equal(ids.length, 20000);
        for (let i = 1; i < ids.length; i++)
            assert.ok(ids[i] > ids[i - 1]);
        ids.forEach((id) => all.add(id));
    }
    assert.equal(all.size, 60000);
    fs.rmSync(dir, { recursive: true });
});

test('the taker stops at SIGTERM and reports what it wrote', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'snowid-node-taker-'));
    const prefix = path.join(dir, 'ids');
    const r = await runTaker(['-i', process.env.SNOWID_INSTANCE, '-o', prefix, '-t', '2', '-r', '100000'],
        (p) => setTimeout(() => p.kill('SIGTERM'), 200));
    assert.equal(r.code, 0);
    const n = readIds(`${prefix}.0`).length + readIds(`${prefix}.1`).length;
    assert.ok(n > 0);
    assert.equal(r.lines[1].ids, n);
    fs.rmSync(dir, { recursive: true });
});

test('the taker exits 1 when it cannot open', async () => {
    const r = await runTaker(['-i', 'no-such-instance', '-o', '/dev/null']).catch((e) => e);
    assert.equal(r.code, 1);
});
