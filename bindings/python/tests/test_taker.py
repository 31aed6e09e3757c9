# SPDX-License-Identifier: MIT
"""taker.py: files and JSON as tests/taker.c writes them."""
import array
import json
import os
import signal
import subprocess
import sys
import time

TAKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "taker.py")


def read_ids(path):
    a = array.array("Q")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def test_count(tmp_path):
    prefix = str(tmp_path / "ids")
    r = subprocess.run([sys.executable, TAKER, "-i", os.environ["SNOWID_INSTANCE"], "-o", prefix,
                        "-t", "3", "-n", "20000", "-b", "16", "-w", "200000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert json.loads(lines[0]) == {"started": True}
    res = json.loads(lines[1])
    assert res == {"ids": 60000, "eagain": 0, "other_errors": 0, "last_error": ""}
    every = []
    for t in range(3):
        ids = read_ids(f"{prefix}.{t}")
        assert len(ids) == 20000
        assert all(a < b for a, b in zip(ids, ids[1:]))
        every += ids
    assert len(set(every)) == 60000


def test_sigterm_and_rate(tmp_path):
    prefix = str(tmp_path / "ids")
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, TAKER, "-i", os.environ["SNOWID_INSTANCE"],
                          "-o", prefix, "-t", "2", "-r", "2000"],
                         stdout=subprocess.PIPE, text=True)
    assert json.loads(p.stdout.readline()) == {"started": True}
    time.sleep(0.5)  # the span the rate is measured over
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=30)
    took = time.monotonic() - t0
    assert p.returncode == 0
    res = json.loads(out)
    # 2 a ms for each of 2 threads, and the ms they were in when stopped
    assert 0 < res["ids"] <= 2 * 2 * (took * 1000 + 2)
    assert res["other_errors"] == 0
    total = sum(len(read_ids(f"{prefix}.{t}")) for t in range(2))
    assert total == res["ids"]


def test_open_fails():
    r = subprocess.run([sys.executable, TAKER, "-i", "no-such-instance", "-o", "/dev/null"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "ENOENT" in r.stderr
