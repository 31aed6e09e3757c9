# SPDX-License-Identifier: MIT
"""The Python client against a real snowidd (run under bindings/with_daemon.py,
which sets SNOWID_RUNTIME_DIR and SNOWID_INSTANCE)."""
import array
import errno
import os
import threading
import time
import uuid

import pytest

import snowid


@pytest.fixture
def s():
    with snowid.SnowId() as h:
        yield h


def test_next_unique_increasing(s):
    ids = [s.next() for _ in range(200_000)]
    assert all(a < b for a, b in zip(ids, ids[1:]))
    assert all(0 < i < 1 << 63 for i in ids[:10])


def test_threads_increasing_and_unique(s):
    per, n = 30_000, 4
    out = [None] * n

    def take(k):
        if k % 2:
            got = []
            for _ in range(per // 50):
                got.extend(s.next_batch(50))
            out[k] = got
        else:
            out[k] = [s.next() for _ in range(per)]

    ts = [threading.Thread(target=take, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    every = []
    for got in out:
        assert len(got) == per
        assert all(a < b for a, b in zip(got, got[1:]))
        every += got
    assert len(set(every)) == len(every)


def test_handles_share_the_counter(s):
    with snowid.SnowId() as t:
        ids = []
        for _ in range(10_000):
            ids.append(s.next())
            ids.append(t.next())
    assert all(a < b for a, b in zip(ids, ids[1:]))


def test_batch(s):
    before = s.next()
    b = s.next_batch(64)
    after = s.next()
    assert isinstance(b, list) and len(b) == 64
    assert before < b[0] and b[-1] < after
    assert all(a < c for a, c in zip(b, b[1:]))
    a = s.next_batch(n=100, as_array=True)
    assert isinstance(a, array.array) and a.typecode == "Q" and len(a) == 100
    assert all(x < y for x, y in zip(a, a[1:]))
    assert a[0] > after
    big = s.next_batch(1 << s.layout.seq_bits)
    assert len(set(big)) == len(big) == 1 << s.layout.seq_bits
    assert s.next_batch(1) [0] > big[-1]


@pytest.mark.parametrize("n", [0, -1, 4097, 1 << 40, 1 << 70])
def test_batch_bad_count(s, n):
    with pytest.raises(OSError) as e:
        s.next_batch(n)
    assert e.value.errno == errno.EINVAL
    assert "EINVAL" in str(e.value)
    with pytest.raises(OSError) as e:
        s.next_batch(n, as_array=True)
    assert e.value.errno == errno.EINVAL


def test_batch_arguments(s):
    with pytest.raises(TypeError):
        s.next_batch()
    with pytest.raises(TypeError):
        s.next_batch(1.5)
    with pytest.raises(TypeError):
        s.next_batch(3, bogus=True)


def test_decode_matches_status_and_layout(s):
    st = s.status()
    lay = s.layout
    assert lay.time_bits + lay.worker_bits + lay.seq_bits == 63
    i = s.next()
    p = s.decode(i)
    assert p.worker == st.worker
    assert p.unix_ms == p.time_ms + lay.epoch_ms
    assert abs(p.unix_ms - time.time() * 1000) < 5000
    assert p.sequence < 1 << lay.seq_bits
    assert i >> (lay.worker_bits + lay.seq_bits) == p.time_ms
    assert snowid.encode(p.time_ms, p.worker, p.sequence, lay) == i
    assert snowid.decode(i, lay) == p
    if lay == snowid.default_layout():
        assert snowid.decode(i) == p
    # a Parts is a named tuple
    t, u, w, q = p
    assert (t, u, w, q) == (p.time_ms, p.unix_ms, p.worker, p.sequence)


def test_decode_default_layout():
    lay = snowid.default_layout()
    assert lay == (snowid.EPOCH_DEFAULT_MS, 41, 10, 12)
    i = snowid.encode(1000, 5, 7)
    assert i == (1000 << 22) | (5 << 12) | 7
    assert snowid.decode(i) == (1000, snowid.EPOCH_DEFAULT_MS + 1000, 5, 7)


def test_decode_errors():
    with pytest.raises(OSError) as e:
        snowid.decode(1, (0, 40, 10, 10))  # 60 bits: not a layout
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        snowid.encode(1, 1 << 10, 0)  # worker does not fit 10 bits
    assert e.value.errno == errno.ERANGE
    with pytest.raises(OSError) as e:
        snowid.decode(-1)
    assert e.value.errno == errno.ERANGE
    with pytest.raises(TypeError):
        snowid.decode("1")


def test_uuid7(s):
    us = [s.next_uuid7() for _ in range(1000)]
    assert all(isinstance(u, uuid.UUID) for u in us)
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in us)
    assert all(a < b for a, b in zip(us, us[1:]))
    assert all(a.bytes < b.bytes for a, b in zip(us, us[1:]))
    u = us[-1]
    assert u == uuid.UUID(bytes=u.bytes) and hash(u) == hash(uuid.UUID(str(u)))
    assert u.is_safe == uuid.SafeUUID.unknown
    p = s.decode_uuid7(u)
    assert p.worker == s.status().worker
    assert abs(p.unix_ms - time.time() * 1000) < 5000
    assert snowid.decode_uuid7(u.bytes, s.layout) == p
    with pytest.raises(OSError) as e:
        snowid.decode_uuid7(uuid.uuid4())
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        snowid.decode_uuid7(b"short")
    assert e.value.errno == errno.EINVAL


def test_uuid7_and_ids_never_share_a_value(s):
    ids = [s.next() for _ in range(100)]
    u = s.next_uuid7()
    after = s.next()
    p = s.decode_uuid7(u)
    assert s.decode(ids[-1]) < (p.time_ms, p.unix_ms, p.worker, p.sequence) or \
        s.decode(ids[-1]).time_ms < p.time_ms
    assert (p.time_ms, p.sequence) < (s.decode(after).time_ms, s.decode(after).sequence)


def test_status(s):
    st = s.status()
    assert snowid.State(st.state) == snowid.State.LEASED
    assert st.generation % 2 == 0
    assert st.headroom_ms > 0
    assert st.daemon_pid > 0 and st.daemon_pid != os.getpid()
    assert st.deadline_unix_ms == st.deadline_ms + s.layout.epoch_ms
    assert isinstance(st.tsc_clock, bool)


def test_state_names():
    assert snowid.State(3) is snowid.State.RESTORED
    assert snowid.State(6) is snowid.State.STORE_FULL
    assert snowid.State.STORE_FULL.name == "STORE_FULL"
    # the old name, kept as an alias until the next release
    assert snowid.State.ETCD_FULL is snowid.State.STORE_FULL
    assert [m.value for m in snowid.State] == list(range(7))


def test_host_stats(s):
    a = s.host_stats()
    s.next_batch(1000)
    b = s.host_stats()
    assert b.issued >= a.issued + 1000
    assert all(x >= 0 for x in b)


def test_ceiling_waits_hold_no_eagain(s):
    # batches of 64 pass the layout's ceiling (2**seq_bits IDs a ms): the
    # counter runs ahead of the clock and calls wait for it, under a ms,
    # with the GIL held; they are not counted as calls that gave up
    a = s.host_stats()
    for _ in range(20_000):
        s.next_batch(64)
    b = s.host_stats()
    ceiling = b.waits_ceiling - a.waits_ceiling
    assert ceiling > 0
    # (a thread descheduled for a ms in a wait goes the long way: rare)
    assert (b.eagain - a.eagain) * 10 <= ceiling


def test_open_missing_instance():
    with pytest.raises(FileNotFoundError) as e:
        snowid.SnowId("no-such-instance")
    assert e.value.errno == errno.ENOENT
    assert "ENOENT" in str(e.value)


def test_open_bad_name():
    for bad in ("../x", "a/b", ""):
        with pytest.raises(OSError) as e:
            snowid.SnowId(bad)
        assert e.value.errno in (errno.EINVAL, errno.ENOENT), bad
    with pytest.raises(OSError) as e:
        snowid.SnowId("a\0b")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(TypeError):
        snowid.SnowId(5)


def test_open_relative_runtime_dir(monkeypatch):
    # the right directory, named relative to the working directory
    d = os.environ["SNOWID_RUNTIME_DIR"]
    monkeypatch.chdir(os.path.dirname(d))
    monkeypatch.setenv("SNOWID_RUNTIME_DIR", os.path.basename(d))
    with pytest.raises(OSError) as e:
        snowid.SnowId()
    assert e.value.errno == errno.EINVAL


def test_instance_by_name():
    name = os.environ["SNOWID_INSTANCE"]
    with snowid.open(name) as h:
        assert h.instance == name
        assert h.next() > 0


def test_closed_handle():
    h = snowid.SnowId()
    assert not h.closed
    h.close()
    assert h.closed
    h.close()  # twice is fine
    for call in (h.next, lambda: h.next_batch(2), h.next_uuid7, h.status, h.host_stats,
                 lambda: h.layout, lambda: h.decode(1), lambda: h.set_max_wait(1)):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EINVAL
        assert "closed" in str(e.value)
    with pytest.raises(OSError):
        with h:
            pass


def test_context_manager_closes():
    with snowid.SnowId() as h:
        assert h.next() > 0
    assert h.closed


def test_max_wait():
    with snowid.SnowId(max_wait=0.25) as h:
        assert h.max_wait == 0.25
        h.set_max_wait(0)
        assert h.max_wait == 0
        h.set_max_wait(None)
        assert h.max_wait is None
        h.set_max_wait(2)
        assert h.max_wait == 2.0
        with pytest.raises(ValueError):
            h.set_max_wait(-1)
        with pytest.raises(ValueError):
            h.set_max_wait(float("nan"))
        with pytest.raises(TypeError):
            h.set_max_wait("1")
        assert h.next() > 0
    assert snowid.SnowId().max_wait == snowid.MAX_WAIT_DEFAULT == 0.1


def test_fork(s):
    parent = s.next_batch(1000)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            ids = array.array("Q", s.next_batch(1000) + [s.next() for _ in range(1000)])
            os.write(w, ids.tobytes())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    assert os.waitpid(pid, 0)[1] == 0
    child = array.array("Q", data)
    assert len(child) == 2000
    mine = s.next_batch(1000)
    assert len(set(parent) | set(child) | set(mine)) == 4000
    assert child[0] > parent[-1] and mine[0] > parent[-1]
