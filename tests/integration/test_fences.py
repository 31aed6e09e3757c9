# SPDX-License-Identifier: MIT
"""Fences (docs/fences.md): what keeps IDs unique when etcd forgets.

A mark deleted under a holder that runs ahead of the wall clock, etcd restored
from a snapshot (with a holder stalled across it, and with a daemon running
and nobody fencing), the layout key lost, and a claim of a number whose mark
is ahead.  Real etcd, real daemons and clients; every ID every client took is
checked for duplicates."""
import datetime
import json
import re
import signal
import time

from harness import (STORE, EPOCH_MS, Daemon, Etcd, Store, Taker, check_unique_and_increasing, cli_status,
                     decode, fence, free_port, http_get, id_time_now, lead_of, log, mark, metric,
                     past_deadline, run, take, try_take, wait_for)

FAST = ["--lease-ttl", "3", "--window", "3", "--renew-interval", "500", "--etcd-timeout", "1000"]
# two worker numbers: a takeover can be forced onto one number
TINY = ["--time-bits", "50", "--worker-bits", "1", "--seq-bits", "12"]
# tests 1-3 are about fences, not about the clock policy: a holder that starts
# ahead of the wall clock must not move to a fresh number for that reason
NO_STEP = ["--step-back-threshold", "600000"]
# the phrase of the interface ("Raised the mark of worker 0 back to V"), or
# "The mark of worker 0 reads absent ...: raising it"
RAISED = re.compile(r"raised the mark of worker 0|mark of worker 0 reads absent.*rais", re.I)
RATE = ["-r", "50000"]  # IDs a second per taker thread: small files, 50 a ms


def tt(i):
    """ID time (ms since the epoch) of an ID of the 1-worker-bit layout."""
    return decode(i, 1)[0]


def tw(i):
    return decode(i, 1)[1]


def key(cluster, k):
    return f"/snowid/{cluster}/{k}"


def hwm(etcd, cluster, n):
    v = etcd.get(key(cluster, f"hwm/{n}"))[0]
    return int(v) if v is not None else None


def deadline_of(instance):
    """The deadline in the segment, in ID time (ms), from snowid status."""
    d = cli_status(instance).get("deadline", "")
    t = datetime.datetime.strptime(d.split(" ")[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    unix_ms = int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000 + 0.5)
    return unix_ms - EPOCH_MS


def make_cluster(h, etcd, cluster):
    """A used 1-worker-bit cluster: a daemon creates its layout (and, with the
    new rules, its fence and floor), marks its number, and stops (SIGTERM)."""
    s = Daemon(h, etcd, instance=h.instance + "-setup", name="setup-" + cluster,
               args=["--cluster", cluster, "--window", "1", "--lease-ttl", "2",
                     "--renew-interval", "500", "--etcd-timeout", "1000"] + TINY).start()
    assert s.stop() == 0
    assert etcd.get(key(cluster, "layout"))[0] is not None
    age_cluster(etcd, cluster)


def age_cluster(etcd, cluster):
    """The cluster as it is long after it was made: the lead its creation
    gave (claims above the clock bound, docs/fences.md) slewed away.  Its
    fence claims above 0, as an earlier snowid's did, and its marks and
    floor are a second behind the clock: the tests that use it measure
    leads of their own making."""
    f = json.loads(etcd.get(key(cluster, "fence"))[0])
    assert f.pop("made") is True, f
    f["claims_above"] = 0
    etcd.put(key(cluster, "fence"), json.dumps(f, separators=(",", ":")))
    past = id_time_now() - 1000
    for k in etcd.prefix(key(cluster, "hwm/")):
        etcd.put(k, mark(past))
    etcd.put(key(cluster, "floor"), mark(past))


def hold_by_third_party(etcd, cluster, n):
    """workers/<n> held for good by a key with no lease: no daemon claims n."""
    etcd.put(key(cluster, f"workers/{n}"), '{"instance":"third-party"}')


def marks_ahead(etcd, cluster, lead_ms, numbers=(0, 1)):
    """Writes hwm/<n> lead_ms ahead of the wall clock; the value written."""
    v = id_time_now() + lead_ms
    for n in numbers:
        old = hwm(etcd, cluster, n)
        assert old is None or old < v, f"hwm/{n} is already {old}"
        etcd.put(key(cluster, f"hwm/{n}"), mark(v))
    return v


def snapshot(h, etcd):
    """etcdctl snapshot save, between two values of a key that no daemon
    touches, so that a restore is seen to take the second back whatever the
    daemons write meanwhile; returns (path, check) where check() asserts it."""
    etcd.put("/test/sentinel", "in-snapshot")
    path = h.path(f"snap-{etcd.restores}.db")
    etcd.snapshot_save(path)
    etcd.put("/test/sentinel", "after-snapshot")

    def check():
        assert etcd.get("/test/sentinel")[0] == "in-snapshot", "the restore took nothing back"
    return path, check


def cover(instance, t, what):
    """Takes IDs on the instance until their ID time passes t, so that its
    clients have gone through every ID time an earlier holder may have used
    (without a fence, that is where the duplicates are)."""
    wait_for(lambda: tt(take(instance)[0]) > t, 15, what, interval=0.05)


def deadline_passed(instance):
    return try_take(instance, 1, wait_ms=10) is None


def healthz(port):
    return http_get(port, "/healthz")


# ---- 1. a mark deleted under a holder that is ahead of the wall clock ----

def test_mark_deleted_under_ahead_holder(h):
    etcd = Store(h)
    c = "del"
    make_cluster(h, etcd, c)
    hold_by_third_party(etcd, c, 1)
    ahead = marks_ahead(etcd, c, 4000)
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a",
               args=FAST + NO_STEP + ["--cluster", c]).start()
    ca = Taker(h, instance=a.instance, name="a", extra=RATE)
    first = take(a.instance)[0]
    assert tw(first) == 0, "A should hold number 0 (1 is held by a third party)"
    assert tt(first) > ahead, f"A started at {tt(first)}, not above the mark {ahead}"
    assert tt(first) > id_time_now() + 2000, "A should run ahead of the wall clock"
    claimed = wait_for(lambda: hwm(etcd, c, 0), 5, "A's claim")
    wait_for(lambda: hwm(etcd, c, 0) > claimed, 5, "a renewal of A's mark")
    published = deadline_of(a.instance)
    deleted = etcd.delete(key(c, "hwm/0"))
    log(f"hwm/0 = {deleted} deleted under A; A's deadline {published}, "
        f"{published - id_time_now()} ms ahead of the wall clock")
    assert deleted is not None and int(deleted) >= published

    # the holder writes it back, and goes on
    back = wait_for(lambda: hwm(etcd, c, 0), 5, "hwm/0 to be written back")
    assert back >= published, f"hwm/0 came back as {back}, below the deadline {published}"
    wait_for(lambda: RAISED.search(a.log_text()), 5, "A to say it raised the mark")
    wait_for(lambda: deadline_of(a.instance) > published + 1000, 5,
             "A's deadline to move on after the deletion")
    assert "Lost worker number" not in a.log_text()
    assert tw(take(a.instance)[0]) == 0, "A should still hold 0"

    # A dies hard; B takes number 0 over
    lead_a = lead_of(a.instance, 1)
    a.kill9()
    mark_a = hwm(etcd, c, 0)
    log(f"A killed; hwm/0 = {mark_a}")
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b",
               args=FAST + NO_STEP + ["--cluster", c]).start(timeout=30)
    cb = Taker(h, instance=b.instance, name="b", extra=RATE)
    first_b = take(b.instance)[0]
    assert tw(first_b) == 0, "B should hold A's number"
    assert tt(first_b) > mark_a, f"B started at {tt(first_b)}, inside A's range (mark {mark_a})"
    wait_for(lambda: past_deadline(lead_a, mark_a), 20, "A's clients to pass A's deadline")
    cover(b.instance, mark_a, "B's clients to pass A's mark")
    ra, rb = ca.stop(), cb.stop()
    ids_a, ids_b = ca.ids(), cb.ids()
    total = check_unique_and_increasing(ids_a + ids_b)
    max_a = max(tt(i) for i in ids_a[0])
    min_b = min(tt(i) for i in ids_b[0])
    assert max_a < min_b, f"A used ID time {max_a}, B started at {min_b}"
    assert ra["eagain"] > 0, "A's client should have run into A's deadline"
    log(f"mark deleted under A: {total} IDs unique ({rb['ids']} from B); A up to {max_a}, "
        f"B from {min_b}")
    b.stop()


def test_mark_deleted_and_holder_killed(h):
    """Nobody re-raises: the next claimer starts above the floor (rule 3)."""
    etcd = Store(h)
    c = "delkill"
    make_cluster(h, etcd, c)
    hold_by_third_party(etcd, c, 1)
    ahead = marks_ahead(etcd, c, 4000)
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a",
               args=FAST + NO_STEP + ["--cluster", c]).start()
    ca = Taker(h, instance=a.instance, name="a", extra=RATE)
    first = take(a.instance)[0]
    assert tw(first) == 0 and tt(first) > ahead
    claimed = wait_for(lambda: hwm(etcd, c, 0), 5, "A's claim")
    wait_for(lambda: hwm(etcd, c, 0) > claimed, 5, "a renewal of A's mark")
    lead_a = lead_of(a.instance, 1)
    a.kill9()
    deleted = etcd.delete(key(c, "hwm/0"))
    assert deleted is not None
    log(f"A killed and hwm/0 = {deleted} deleted")
    floor = etcd.get(key(c, "floor"))[0]
    assert floor is not None, "no floor key (rule 2)"
    assert int(floor) >= int(deleted), f"floor {floor} is below A's last mark {deleted}"
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b",
               args=FAST + NO_STEP + ["--cluster", c]).start(timeout=30)
    assert hwm(etcd, c, 0) is None or hwm(etcd, c, 0) > int(floor)
    cb = Taker(h, instance=b.instance, name="b", extra=RATE)
    first_b = take(b.instance)[0]
    assert tw(first_b) == 0, "B should hold A's number"
    assert tt(first_b) > int(floor), f"B started at {tt(first_b)}, not above the floor {floor}"
    wait_for(lambda: past_deadline(lead_a, int(deleted)), 20, "A's clients to pass A's deadline")
    cover(b.instance, int(deleted), "B's clients to pass A's last mark")
    ra, rb = ca.stop(), cb.stop()
    ids_a, ids_b = ca.ids(), cb.ids()
    total = check_unique_and_increasing(ids_a + ids_b)
    max_a, min_b = max(tt(i) for i in ids_a[0]), min(tt(i) for i in ids_b[0])
    assert max_a < min_b, f"A used ID time {max_a}, B started at {min_b}"
    log(f"mark deleted with its holder killed: {total} IDs unique; floor {floor}, "
        f"B from {min_b}")
    b.stop()


def test_mark_and_floor_deleted(h):
    """The mark and the floor deleted with the holder dead: a claim of the
    unmarked number must not start at the wall clock (fences.md: it fails
    until snowid fence writes a new floor)."""
    etcd = Store(h)
    c = "delfloor"
    make_cluster(h, etcd, c)
    hold_by_third_party(etcd, c, 1)
    ahead = marks_ahead(etcd, c, 4000)
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a",
               args=FAST + NO_STEP + ["--cluster", c]).start()
    ca = Taker(h, instance=a.instance, name="a", extra=RATE)
    assert tw(take(a.instance)[0]) == 0
    claimed = wait_for(lambda: hwm(etcd, c, 0), 5, "A's claim")
    wait_for(lambda: hwm(etcd, c, 0) > claimed, 5, "a renewal of A's mark")
    lead_a = lead_of(a.instance, 1)
    a.kill9()
    last = int(etcd.delete(key(c, "hwm/0")))
    assert etcd.delete(key(c, "floor")) is not None, "no floor key"
    log(f"A killed; hwm/0 = {last} and the floor deleted")
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b",
               args=FAST + NO_STEP + ["--cluster", c]).start(wait_ready=False)
    wait_for(lambda: b.has_message("READY=1") or "snowid fence" in b.log_text(), 20,
             "B to claim, or to ask for snowid fence")
    ready = b.has_message("READY=1")
    if ready:
        assert tt(take(b.instance)[0]) > last, "B claimed 0 below A's last mark"
    else:
        line = [x for x in b.log_text().splitlines() if "snowid fence" in x]
        log(f"B waits: {line[-1]}")
        assert etcd.get(key(c, "floor"))[0] is None, "a daemon wrote a floor without a fence"
        fence(etcd, c)  # the default --ahead (60 s) covers A, which ran ~7 s ahead
        b.wait_message("READY=1", 15)
    cb = Taker(h, instance=b.instance, name="b", extra=RATE)
    first_b = take(b.instance)[0]
    assert tw(first_b) == 0 and tt(first_b) > last, f"B at {tt(first_b)}, A's last mark {last}"
    wait_for(lambda: past_deadline(lead_a, last), 20, "A's clients to pass A's deadline")
    cover(b.instance, last, "B's clients to pass A's last mark")
    ca.stop(), cb.stop()
    total = check_unique_and_increasing(ca.ids() + cb.ids())
    log(f"mark and floor deleted: {total} IDs unique; B {'claimed' if ready else 'waited'}")
    b.stop()


# ---- 2. etcd restored from a snapshot ----

def test_restore_with_stalled_holder(h):
    etcd = Store(h)
    c = "snap"
    # A's window (10 s) outlives its lease (3 s): while A is stalled, its clients
    # go on well past the time another host may claim its number
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a",
               args=FAST + NO_STEP + ["--cluster", c, "--window", "10"] + TINY).start()
    ca = Taker(h, instance=a.instance, name="a", extra=RATE)
    n = tw(take(a.instance)[0])
    hold_by_third_party(etcd, c, 1 - n)
    snap_mark = hwm(etcd, c, n)
    snap, restored_ok = snapshot(h, etcd)
    wait_for(lambda: hwm(etcd, c, n) > snap_mark + 3000, 10, "A's mark to move past the snapshot's")
    lead_a = lead_of(a.instance, 1)
    a.signal(signal.SIGSTOP)
    before = hwm(etcd, c, n)
    log(f"A holds {n}, stopped; hwm/{n} {snap_mark} in the snapshot, {before} now")
    etcd.restore(snap)
    restored_ok()
    restored = hwm(etcd, c, n)  # A is stopped: nobody writes it
    assert restored < before, f"the restore did not take hwm/{n} back ({restored})"
    # --window: the largest in the fleet (docs/fences.md, the assumption)
    fence(etcd, c, "--ahead", "2000", "--window", "10")
    fv = etcd.get(key(c, "fence"))[0]
    assert fv is not None, "no fence key after snowid fence"
    claims_above = int(json.loads(fv)["claims_above"])
    assert claims_above > before, f"claims_above {claims_above} is below A's last mark {before}"
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b",
               args=FAST + NO_STEP + ["--cluster", c]).start(timeout=30)
    cb = Taker(h, instance=b.instance, name="b", extra=RATE)
    first_b = take(b.instance)[0]
    assert tw(first_b) == n, "B should hold A's number"
    assert tt(first_b) > claims_above, f"B started at {tt(first_b)}, not above {claims_above}"
    a.signal(signal.SIGCONT)
    log("A continued")
    # A may first see the revision go back; either way it must go on by itself
    # once it sees that the fence has changed (rules 5 and 6)
    wait_for(lambda: "new fence" in a.log_text(), 10, "A to see the new fence")
    wait_for(lambda: past_deadline(lead_a, before), 25, "A's clients to pass A's deadline")
    cover(b.instance, before, "B's clients to pass A's last mark")
    # A's re-raise (rule 6) must not lower B's mark
    assert hwm(etcd, c, n) >= tt(first_b), "hwm went below what B uses"
    ra, rb = ca.stop(), cb.stop()
    ids_a, ids_b = ca.ids(), cb.ids()
    total = check_unique_and_increasing(ids_a + ids_b)
    on_n_a = [tt(i) for i in ids_a[0] if tw(i) == n]
    on_n_b = [tt(i) for i in ids_b[0] if tw(i) == n]
    assert on_n_a and on_n_b
    assert max(on_n_a) < min(on_n_b), f"A used {max(on_n_a)} on {n}, B started at {min(on_n_b)}"
    assert ra["eagain"] > 0, "A's client should have run into A's deadline"
    seen = [p for p in ("was restored from a snapshot", "new fence") if p in a.log_text()]
    log(f"restore with A stalled: {total} IDs unique; A up to {max(on_n_a)}, B from "
        f"{min(on_n_b)}; A's log: {seen}")
    b.stop()


def test_restore_without_fence(h):
    etcd = Store(h)
    port = free_port()
    d = Daemon(h, etcd, args=FAST + ["--http", f"127.0.0.1:{port}"]).start()
    ct = Taker(h, extra=RATE)
    n = decode(take(h.instance)[0])[1]
    wait_for(lambda: healthz(port)[0] == 200, 5, "healthz 200")
    snap_mark = int(etcd.get(f"/snowid/default/hwm/{n}")[0])
    snap, restored_ok = snapshot(h, etcd)
    wait_for(lambda: int(etcd.get(f"/snowid/default/hwm/{n}")[0]) > snap_mark + 3000, 10,
             "the mark to move past the snapshot's")
    before = int(etcd.get(f"/snowid/default/hwm/{n}")[0])
    etcd.restore(snap)
    restored_ok()

    wait_for(lambda: "was restored from a snapshot" in d.log_text(), 10, "the daemon to see the restore")
    wait_for(lambda: healthz(port)[0] == 503 and "restored" in healthz(port)[1], 5,
             "healthz 503 saying restored")
    assert cli_status(h.instance).get("state") == "store-restored", cli_status(h.instance)
    halted = 'snowid_cluster_halted{reason="store-restored"}'
    assert metric(port, halted) == 1, f"{halted} is {metric(port, halted)}"
    # its deprecated twin, served until the next release
    assert metric(port, 'snowid_cluster_halted{reason="etcd-restored"}') == 1
    # it stops extending: its clients reach the deadline
    wait_for(lambda: deadline_passed(h.instance), 3 + 5, "clients to get EAGAIN past the deadline")
    assert cli_status(h.instance).get("state") == "store-restored"

    fence(etcd, "default")
    wait_for(lambda: not deadline_passed(h.instance), 10, "IDs again after snowid fence")
    wait_for(lambda: healthz(port)[0] == 200, 5, "healthz 200 again")
    assert metric(port, halted) == 0
    assert "new fence" in d.log_text()
    assert cli_status(h.instance).get("state") != "store-restored"
    # the marks it published before the restore are raised again (rule 6)
    wait_for(lambda: int(etcd.get(f"/snowid/default/hwm/{n}")[0]) >= before, 5,
             f"hwm/{n} raised back to {before}")
    after = take(h.instance, 1)
    r = ct.stop()
    total = check_unique_and_increasing(ct.ids() + [after])
    assert r["eagain"] > 0, "the deadline should have passed while halted"
    log(f"restore without fence: {total} IDs unique; worker {n} then "
        f"{decode(after[0])[1]}")
    d.stop()


# ---- 3. the layout key lost ----

def test_layout_lost(h):
    etcd = Store(h)
    port = free_port()
    d = Daemon(h, etcd, args=FAST + ["--http", f"127.0.0.1:{port}"]).start()
    ct = Taker(h, extra=RATE)
    wait_for(lambda: healthz(port)[0] == 200, 5, "healthz 200")
    layout = etcd.get("/snowid/default/layout")[0]
    assert etcd.delete("/snowid/default/layout") == layout
    log("layout deleted")
    wait_for(lambda: "layout key is gone" in d.log_text(), 10, "the daemon to see the layout gone")
    wait_for(lambda: healthz(port)[0] == 503 and "layout" in healthz(port)[1], 5,
             "healthz 503 saying layout")
    assert cli_status(h.instance).get("state") == "layout-lost", cli_status(h.instance)
    lost = 'snowid_cluster_halted{reason="layout-lost"}'
    assert metric(port, lost) == 1, f"{lost} is {metric(port, lost)}"
    wait_for(lambda: deadline_passed(h.instance), 3 + 5, "clients to get EAGAIN past the deadline")
    assert etcd.get("/snowid/default/layout")[0] is None, "the daemon re-created the layout"

    fence(etcd, "default")
    new_layout = etcd.get("/snowid/default/layout")[0]
    assert new_layout is not None, "snowid fence did not re-create the layout"
    assert json.loads(new_layout) == json.loads(layout), f"{new_layout} != {layout}"
    wait_for(lambda: not deadline_passed(h.instance), 10, "IDs again after snowid fence")
    wait_for(lambda: healthz(port)[0] == 200, 5, "healthz 200 again")
    assert metric(port, lost) == 0
    r = ct.stop()
    total = check_unique_and_increasing(ct.ids())
    assert r["eagain"] > 0
    assert d.proc.poll() is None, "the daemon should go on with the same layout"
    log(f"layout lost: {total} IDs unique")
    d.stop()


def test_no_layout_on_used_cluster(h):
    """A new daemon on a cluster with marks but no layout creates none."""
    etcd = Store(h)
    c = "bare"
    old = id_time_now() + 2000
    etcd.put(key(c, "hwm/5"), mark(old))
    d = Daemon(h, etcd, instance=h.instance + "-bare", name="bare",
               args=FAST + ["--cluster", c]).start(wait_ready=False)

    def refused():
        assert etcd.get(key(c, "layout"))[0] is None, "the daemon created a layout"
        assert not d.has_message("READY=1"), "the daemon became ready"
        return d.proc.poll() is not None or "snowid fence" in d.log_text()
    wait_for(refused, 10, "the daemon to refuse, naming snowid fence")
    running = d.proc.poll() is None
    assert running or d.proc.returncode != 0, "exit 0 without a layout"
    line = [x for x in d.log_text().splitlines() if "layout" in x.lower()]
    log(f"no layout: daemon {'waits' if running else f'exited {d.proc.returncode}'}: "
        f"{line[-1] if line else d.log_text()[-300:]}")
    assert etcd.get(key(c, "layout"))[0] is None

    fence(etcd, c)
    assert etcd.get(key(c, "layout"))[0] is not None
    if not running:
        d = Daemon(h, etcd, instance=h.instance + "-bare", name="bare2",
                   args=FAST + ["--cluster", c]).start(wait_ready=False)
    d.wait_message("READY=1", 15)
    ids = take(d.instance, 100)
    n = decode(ids[0])[1]
    if n == 5:
        assert decode(ids[0])[0] > old, "a claim of 5 started below its mark"
    floor = etcd.get(key(c, "floor"))[0]
    assert floor is not None
    log(f"fenced: the daemon holds {n}, floor {int(floor)}")
    d.stop()


# ---- 4. a claim of a mark-ahead number comes back to the wall clock ----

def test_ahead_claim_slews_back(h):
    etcd = Store(h)
    c = "ahead"
    make_cluster(h, etcd, c)
    lead = 2000
    slew_us = 100000  # 100 ms a second, the largest; the --lead it needs
    port = free_port()
    ahead = marks_ahead(etcd, c, lead)
    d = Daemon(h, etcd, name="d", args=["--cluster", c, "--slew", str(slew_us), "--lead", "20",
                                        "--http", f"127.0.0.1:{port}"]).start()
    ct = Taker(h, extra=RATE)
    first = take(h.instance)[0]
    w = tw(first)
    assert tt(first) > ahead, f"the claim started at {tt(first)}, below the mark {ahead}"
    start = time.monotonic()
    samples = []

    # each sample: the lead at most (the wall clock read before the ID was
    # taken) and at least (read after), so that a slow `snowid next` on a
    # busy machine cannot look like ID time going back
    def caught_up():
        before = id_time_now()
        i = take(h.instance)[0]
        after = id_time_now()
        assert tw(i) == w, f"the worker changed from {w} to {tw(i)}"
        samples.append((time.monotonic(), tt(i) - after, tt(i) - before))
        return samples[-1][1] < 50
    wait_for(caught_up, lead / (slew_us / 1e6) / 1000 * 1.5 + 10, "ID time back on the wall clock",
             interval=0.2)
    took = time.monotonic() - start
    assert samples[0][1] > lead / 2, f"the first lead was {samples[0][1]} ms"
    # gradually: never more than the slew (and some noise) between two samples
    for (t0, l0, _), (t1, _, h1) in zip(samples, samples[1:]):
        assert l0 - h1 <= (t1 - t0) * slew_us / 1000 * 1.5 + 30, \
            f"ID time went back at least {l0 - h1} ms in {t1 - t0:.2f} s"
    r = ct.stop()
    total = check_unique_and_increasing(ct.ids())
    assert {tw(i) for i in ct.ids()[0]} == {w}, "the taker saw another worker"
    assert r["eagain"] == 0 and r["other_errors"] == 0, r
    assert "moving to a fresh worker number" not in d.log_text()
    assert metric(port, "snowid_worker_switches_total") in (None, 0, 1)
    log(f"ahead claim: {total} IDs, worker {w} kept, {samples[0][1]} ms ahead brought back "
        f"in {took:.1f} s")
    d.stop()


if __name__ == "__main__":
    import sys
    tests = [test_mark_deleted_under_ahead_holder, test_mark_deleted_and_holder_killed,
             test_mark_and_floor_deleted,
             test_restore_with_stalled_holder, test_restore_without_fence, test_layout_lost,
             test_no_layout_on_used_cluster, test_ahead_claim_slews_back]
    if STORE == "postgres":
        # where the store matters: a deleted mark (its floor is the stored
        # floor and the marks), its restores and `snowid fence` on it (a
        # holder's raises and slews are the daemon's, run against etcd)
        tests = [test_mark_deleted_and_holder_killed, test_mark_and_floor_deleted, test_restore_with_stalled_holder,
                 test_restore_without_fence, test_layout_lost, test_no_layout_on_used_cluster]
    run([t for t in tests if len(sys.argv) < 2 or t.__name__ in sys.argv[1:]])
