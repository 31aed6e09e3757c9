# SPDX-License-Identifier: MIT
"""The claim storm, for bench/coordination.sh: N snowidd started at the same
moment on one store, each with its own instance and notify socket; the time
from that moment until every one has sent READY=1 (it holds a worker number
and its segment is published).

    claim-storm.py --snowidd PATH --count N --cluster NAME [--timeout SEC]
                   -- STORE FLAGS (--etcd URL, or --store postgres --postgres CONNINFO)

Prints one JSON line: {"count", "all_ready_s", "first_s", "median_s"}.  The
daemons are held at a barrier once started (a shell waiting on a pipe) and
released together, so that starting 200 processes one after another is not
part of what is measured.
"""
import argparse
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# the shell each daemon starts in: says it is there (a byte on one pipe),
# waits for the word (a line on the other), then becomes the daemon without
# the barrier's descriptors
BARRIER = 'echo >&{here}; read -r _ <&{go}; exec {here}>&- {go}<&-; exec "$@"'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--snowidd", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--log", default=None, help="the daemons' output (default: thrown away)")
    ap.add_argument("store", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    store = a.store[1:] if a.store[:1] == ["--"] else a.store
    work = tempfile.mkdtemp(prefix="storm-")
    # the daemons' sockets: writable by its owner only, as clients insist
    rundir = os.path.join(work, "run")
    os.mkdir(rundir, 0o755)
    procs = []
    sel = selectors.DefaultSelector()
    logf = open(a.log or os.devnull, "ab")
    here_r, here_w = os.pipe()
    go_r, go_w = os.pipe()
    try:
        for i in range(a.count):
            path = os.path.join(work, f"n{i}")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(path)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, i)
            cmd = [a.snowidd, "--config", "/dev/null", *store, "--cluster", a.cluster,
                   "--instance", f"storm{i}-{os.getpid()}", "--runtime-dir", rundir,
                   "--log-level", "warning"]
            procs.append(subprocess.Popen(
                ["bash", "-c", BARRIER.format(here=here_w, go=go_r), "bash"] + cmd,
                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                env=dict(os.environ, NOTIFY_SOCKET=path), pass_fds=(here_w, go_r),
                start_new_session=True))
        os.close(here_w)
        os.close(go_r)
        arrived = 0
        deadline = time.monotonic() + 60
        while arrived < a.count:
            if time.monotonic() > deadline:
                raise SystemExit(f"claim-storm: {arrived} of {a.count} shells started in 60 s")
            arrived += len(os.read(here_r, 4096))
        t0 = time.monotonic()
        os.write(go_w, b"\n" * a.count)
        os.close(go_w)
        ready = {}
        deadline = t0 + a.timeout
        while len(ready) < a.count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"claim-storm: {len(ready)} of {a.count} READY after "
                                 f"{a.timeout:.0f} s")
            for key, _ in sel.select(min(left, 0.5)):
                try:
                    msg = key.fileobj.recv(4096).decode(errors="replace")
                except BlockingIOError:
                    continue
                if "READY=1" in msg.split("\n") and key.data not in ready:
                    ready[key.data] = time.monotonic() - t0
            dead = [i for i, p in enumerate(procs) if i not in ready and p.poll() is not None]
            if dead:
                raise SystemExit(f"claim-storm: daemon {dead[0]} exited with "
                                 f"{procs[dead[0]].returncode} before READY")
        t = sorted(ready.values())
        print(json.dumps({"count": a.count, "all_ready_s": round(t[-1], 3),
                          "first_s": round(t[0], 3), "median_s": round(t[len(t) // 2], 3)}),
              flush=True)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        logf.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
