# SPDX-License-Identifier: MIT
"""Traces of real runs replayed on the rules (docs/testing.md, "Traces").

With SNOWID_TRACE set, snowidd and `snowid fence` note every decision of
daemon/rules/ with its inputs and result; build/tests/snowid-replay asks the
rules each one again.  An ordinary life of two daemons on a real etcd (a
cluster made, a fence, a stop and a start again) replays decision for
decision; a daemon built with a rule broken on purpose is caught at its
first claim."""
import os
import re
import subprocess

from harness import (BUILD, CLI, Daemon, Store, check_unique_and_increasing, log, run,
                     store_args, take, try_take, wait_for)

FAST = ["--lease-ttl", "3", "--window", "3", "--renew-interval", "500", "--etcd-timeout", "1000"]
REPLAY = os.path.join(BUILD, "tests", "snowid-replay")
MUTANT = os.path.join(BUILD, "daemon", "snowidd-mutant-5")


def replay(path):
    """(exit code, output) of the replay of a trace."""
    r = subprocess.run([REPLAY, path], capture_output=True, text=True, timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


def counts(out):
    """{decision: count} of the replay's summary line."""
    m = re.search(r"each the same:([^;]*)", out)
    assert m, f"no summary in {out!r}"
    words = m.group(1).split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}


def test_ordinary_run_replays(h):
    etcd = Store(h)
    # a trace per host (model/replay.c checks the steps of one host's daemons)
    traces = {k: h.path(f"trace-{k}.txt") for k in ("d1", "d2", "fence")}
    d1 = Daemon(h, etcd, args=FAST, env={"SNOWID_TRACE": traces["d1"]}, name="d1").start()
    d2 = Daemon(h, etcd, instance=h.instance + "b", args=FAST,
                env={"SNOWID_TRACE": traces["d2"]}, name="d2").start()
    ids = [take(d1.instance, 100), take(d2.instance, 100)]
    # a fence: both daemons adopt it and claim again after its settle pause
    r = subprocess.run([CLI, "fence", *store_args(etcd), "--lost-lead", "0"],
                       env=dict(os.environ, SNOWID_TRACE=traces["fence"]), capture_output=True,
                       text=True,
                       timeout=60)
    assert r.returncode == 0, f"snowid fence: {r.stdout} {r.stderr}"
    log(r.stdout.strip())
    assert r.stdout.startswith("snowid fence:"), r.stdout
    # the stop confirms the number's mark before its lease is revoked; the
    # start claims again
    assert d1.stop() == 0, d1.log_text()
    d1.start()
    wait_for(lambda: try_take(d1.instance, 1, 100) and try_take(d2.instance, 1, 100), 60,
             "both daemons to give IDs after the fence")
    ids += [take(d1.instance, 100), take(d2.instance, 100)]
    check_unique_and_increasing(ids)
    assert d1.stop() == 0 and d2.stop() == 0
    for d in (d1, d2):
        assert "Cannot write the trace" not in d.log_text(), d.log_text()
    c, steps = {}, 0
    for k, path in traces.items():
        with open(path) as f:
            heads = [line for line in f if line.startswith("# ")]
        assert len(heads) == (2 if k == "d1" else 1), (k, heads)
        rc, out = replay(path)
        log(f"{k}'s trace replayed: {out}")
        assert rc == 0, out
        for name, n in counts(out).items():
            c[name] = c.get(name, 0) + n
        m = re.search(r"; ([0-9]+) steps of the holder, each allowed", out)
        steps += int(m.group(1)) if m else 0
    # each kind of step of the run was noted: the cluster made, claims,
    # answers, extensions, the fence made and read, a stop's confirmation
    for name, least in [("rule7_may_make", 1), ("rule7_made_above", 1), ("rule3_claim_start", 4),
                        ("rule5_answer", 20), ("rule6_fence_above", 1), ("rule6_fence_read", 2),
                        ("rule4_confirmed", 1), ("rule5_lease_until", 4)]:
        assert c.get(name, 0) >= least, f"{name}: {c.get(name, 0)} decisions, expected {least}+"
    # four claims sent, acknowledged and published, and extended
    assert steps >= 16, f"{steps} steps of the holders traced"


def test_broken_rule_is_caught(h):
    etcd = Store(h)
    trace = h.path("trace.txt")
    d = Daemon(h, etcd, args=FAST, env={"SNOWID_TRACE": trace}, name="mutant",
               binary=MUTANT).start()
    take(d.instance, 10)
    assert d.stop() == 0
    rc, out = replay(trace)
    log(f"replayed: {out}")
    # the first claim: the rules start it above the fence's claims_above,
    # the mutant at ID time now
    assert rc == 1 and "rule3_claim_start" in out and "the rules give" in out, (rc, out)


def test_steps_checked(h):
    """Each step the checker refuses, in a trace written by hand: the
    decision before it as the rules take it, the step not."""
    start = ("# snowidd 1: test\n@rule3_claim_start 1000 500 1 0 0 0 0 = 500\n"
             "!claiming 7 500\n")
    cases = [
        ("!claimed 7 400 3500\n", "does not start where it was sent from"),
        ("!claimed 8 500 3500\n", "of another number than was sent"),
        ("!claimed 7 500 3500\n!publish 7 500 3600\n", "above the mark the store acknowledged"),
        ("!claimed 7 500 3500\n!publish 7 500 3500\n!marked 7 4000\n!extend 7 4100\n",
         "above the mark the store acknowledged"),
        ("!claimed 7 500 3500\n!publish 7 501 3500\n", "another start than claimed"),
        ("!publish 7 500 3500\n", "not claimed"),
        ("!claimed 7 500 3500\n!publish 7 500 3500\n# snowidd 2: test\n"
         "@rule3_claim_start 1000 500 1 0 0 0 0 = 500\n!claiming 7 500\n!claimed 7 500 3500\n",
         "at or below a deadline this host published"),
        ("!claimed 7 500 3500\n# snowidd 2: test\n!extend 7 3500\n", "not claimed"),
        ("!claimed 7 500 3500\n!claimed 8 500 3500\n", "not sent"),
        ("!claimed 7 500 3500\n!claiming 8 500\n", "no claim start decided"),
        ("!claimed 7 500 3500\n@rule3_claim_start 1000 500 1 0 0 0 0 = 500\n!claiming 8 600\n",
         "does not start where rule3_claim_start said"),
        ("!claimed 7 500 3500\n!publish 7 500 3500\n!dropped 7\n!extend 7 3500\n", "not claimed"),
        ("!dropped 7\n", "not held"),
        ("!claimed 7 500 3500\n!publish 7 500 35", "cut short"),
    ]
    for i, (lines, why) in enumerate(cases):
        path = h.path(f"steps-{i}.txt")
        with open(path, "w") as f:
            f.write(start + lines)
        rc, out = replay(path)
        assert rc in (1, 2) and why in out, (lines, rc, out)
    # and the same run with every step allowed passes
    path = h.path("steps-ok.txt")
    with open(path, "w") as f:
        f.write(start + "!claimed 7 500 3500\n!publish 7 500 3500\n!marked 7 4000\n!extend 7 4000\n"
                "# snowidd 2: test\n@rule3_claim_start 1000 500 1 4000 0 0 0 = 4001\n"
                "!claiming 7 4001\n!claimed 7 4001 7001\n!publish 7 4001 7001\n!dropped 7\n")
    rc, out = replay(path)
    assert rc == 0 and "9 steps of the holder, each allowed" in out, (rc, out)


if __name__ == "__main__":
    run([test_ordinary_run_replays, test_broken_rule_is_caught, test_steps_checked])
