# SPDX-License-Identifier: MIT
"""snowidd that cannot start: it says why and exits 1, having freed only what
it made.

RLIMIT_NOFILE is set so low that the segment and the handshake socket fit
and what comes next does not: the event loop, the handshake server, the TSC
clock or the holder's timers, one step further with each descriptor allowed.
Where the start failed before the holder was started, snowidd used to free a
holder it had never set up and die of SIGSEGV.  No etcd is needed: the start
fails before any request (and were it to get that far, it is killed and that
limit counts as a failure)."""
import os
import resource
import subprocess
import sys
import tempfile

BUILD = os.environ.get("SNOWID_BUILD") or os.path.join(os.path.dirname(__file__), "../../build")
SNOWIDD = os.path.join(BUILD, "daemon", "snowidd")

# 0-2, the instance's lock, the segment's three descriptors, the socket: 8
# lets the start fail at the event loop, the ones above at later steps
LIMITS = range(8, 13)


def run(limit, rundir):
    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    p = subprocess.Popen([SNOWIDD, "--runtime-dir", rundir, "--instance", f"nofile{limit}",
                          "--etcd", "http://127.0.0.1:1", "--tsc-clock", "off"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=low)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        return f"RLIMIT_NOFILE {limit}: still running after 30 s\n{err}"
    if p.returncode != 1 or "Cannot start" not in err:
        return f"RLIMIT_NOFILE {limit}: exit status {p.returncode}\n{err}"
    return None


def main():
    problems = []
    with tempfile.TemporaryDirectory(prefix="snowid-start-") as d:
        os.chmod(d, 0o700)
        for limit in LIMITS:
            r = run(limit, d)
            if r:
                problems.append(r)
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(LIMITS) - len(problems)} of {len(LIMITS)} limits: exit 1 with the reason")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
