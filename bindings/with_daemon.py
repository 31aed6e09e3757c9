#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""with_daemon.py [--http] [--] COMMAND...: runs COMMAND beside a real etcd
and snowidd (the build in $SNOWID_BUILD), on free loopback ports, and
stops them after it; exits with COMMAND's status.  COMMAND sees
SNOWID_RUNTIME_DIR and SNOWID_INSTANCE (where its client finds the segment)
and, with --http, SNOWID_HTTP (the API's base URL, http://127.0.0.1:PORT).
The bindings' own tests and benchmarks run under it."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import Daemon, Etcd, Harness, free_port  # noqa: E402


def main(argv):
    http = False
    extra = []
    while argv and argv[0].startswith("--"):
        a = argv.pop(0)
        if a == "--":
            break
        if a == "--http":
            http = True
        elif a.startswith("--daemon-arg="):
            extra.append(a.split("=", 1)[1])
        else:
            print(f"with_daemon.py: unknown option {a}", file=sys.stderr)
            return 2
    if not argv:
        print("usage: with_daemon.py [--http] [--daemon-arg=ARG]... [--] COMMAND...",
              file=sys.stderr)
        return 2
    if shutil.which("etcd") is None:
        print("etcd is not installed: skipping")
        return 77
    h = Harness(os.path.basename(argv[0])[:20])
    try:
        etcd = Etcd(h)
        etcd.made_long_ago()   # the bindings' tests check ID time against their clock
        env = {"SNOWID_INSTANCE": h.instance, "SNOWID_RUNTIME_DIR": h.rundir}
        if http:
            port = free_port()
            extra += ["--http", f"127.0.0.1:{port}"]
            env["SNOWID_HTTP"] = f"http://127.0.0.1:{port}"
        Daemon(h, etcd, args=extra).start()
        r = subprocess.run(argv, env=dict(os.environ, **env))
        h.failed = r.returncode != 0
        return r.returncode
    finally:
        h.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
