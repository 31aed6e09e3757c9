# SPDX-License-Identifier: MIT
"""The wait budget, with the daemon stopped (SIGSTOP) until its deadline has
passed.  Runs last (file name): it leaves the daemon with a new lease."""
import errno
import os
import signal
import threading
import time

import pytest

import snowid


def test_wait_budget_without_the_daemon():
    s = snowid.SnowId(max_wait=0)
    st = s.status()
    pid = st.daemon_pid
    waited = snowid.SnowId(max_wait=st.headroom_ms / 1000 + 30)
    h = snowid.SnowId(max_wait=0.3)
    os.kill(pid, signal.SIGSTOP)
    try:
        # with no daemon extending it, the deadline comes within headroom_ms
        end = time.monotonic() + st.headroom_ms / 1000 + 10
        while s.status().headroom_ms >= 0:
            assert time.monotonic() < end, "the deadline did not pass"
            time.sleep(0.05)  # polling the condition above

        # budget 0: EAGAIN at once
        t0 = time.monotonic()
        with pytest.raises(BlockingIOError) as e:
            s.next()
        assert e.value.errno == errno.EAGAIN and "EAGAIN" in str(e.value)
        for call in (lambda: s.next_batch(8), s.next_uuid7):
            with pytest.raises(BlockingIOError):
                call()
        assert time.monotonic() - t0 < 0.5
        before = s.host_stats().eagain

        # a budget: EAGAIN after it, and other threads run meanwhile (the
        # GIL is not held while a call waits)
        s.set_max_wait(0.3)
        res = {}

        def wait():
            t = time.monotonic()
            try:
                s.next()
            except OSError as ex:
                res["err"] = ex
            res["took"] = time.monotonic() - t

        t = threading.Thread(target=wait)
        t.start()
        spins = 0
        while t.is_alive():
            spins += 1
        t.join()
        assert isinstance(res["err"], BlockingIOError)
        assert 0.29 <= res["took"] < 5
        assert spins > 10_000
        assert s.host_stats().eagain > before

        # two threads waiting on one handle, and one returning first
        s.set_max_wait(0.2)
        errs = []

        def wait2(budget):
            try:
                s.next_batch(4)
            except OSError as ex:
                errs.append(ex.errno)

        ts = [threading.Thread(target=wait2, args=(b,)) for b in range(3)]
        for x in ts:
            x.start()
        for x in ts:
            x.join()
        assert errs == [errno.EAGAIN] * 3

        # close() while a call waits: the call ends as it would, then the
        # handle is closed
        res.clear()
        e0 = h.host_stats().eagain

        def wait3():
            try:
                h.next()
            except OSError as ex:
                res["err"] = ex

        t = threading.Thread(target=wait3)
        t.start()
        # its first try (with the GIL) counted: it is waiting without the GIL
        while h.host_stats().eagain == e0 and t.is_alive():
            pass
        assert t.is_alive()
        h.close()
        assert h.closed
        with pytest.raises(OSError) as e:
            h.next()
        assert e.value.errno == errno.EINVAL
        t.join()
        assert isinstance(res["err"], BlockingIOError)
    finally:
        os.kill(pid, signal.SIGCONT)
    # the daemon back: a budget long enough for it to lease again gets an ID
    i = waited.next()
    assert i > 0
    assert waited.decode(i).worker == waited.status().worker
    s.set_max_wait(30)
    assert s.next() > i
    waited.close()
    s.close()
