# SPDX-License-Identifier: MIT
"""Restores that daemons reach before their fence, and a stop that confirms
its mark (docs/fences.md, "Which restores a daemon detects, and which only
the procedure covers").

etcd restored with the same cluster token and its revisions refilled by other
clients' writes before any daemon reaches it; a fresh-number move onto a
number whose claim the restore forgot; a daemon started after a restore made
with a new token, before `snowid fence`; a holder stopped with its mark
lowered by hand.  Real etcd, real daemons and clients; every ID is checked
for duplicates."""
import json
import os
import re
import shutil
import signal
import subprocess

from harness import (BUILD, EPOCH_MS, STORE, Daemon, PgStore, Taker, Store, check_unique_and_increasing, cli,
                     cli_status, decode, fence, fence_lead_ms, id_time_now, log, mark, run, store_args, take, wait_for)
from test_clock import faketime_lib
from test_fences import (FAST, NO_STEP, RATE, TINY, deadline_of, deadline_passed, hold_by_third_party,
                         hwm, tt, make_cluster, snapshot, tw)


def state(instance):
    return cli_status(instance).get("state")


def stored_fence(etcd, cluster):
    return json.loads(etcd.get(f"/snowid/{cluster}/fence")[0])


def faked_wall_clock(h, offset):
    """A daemon's environment with its wall clock moved by offset ("+90",
    "-2": seconds), from a file the test may rewrite; (that file, the
    environment).  CLOCK_MONOTONIC stays true."""
    ft = h.path("faketime")
    with open(ft, "w") as f:
        f.write(offset + "\n")
    shim = os.path.join(BUILD, "tests", "libtimerfd-shim.so")
    return ft, {"LD_PRELOAD": f"{shim} {faketime_lib()}", "FAKETIME_TIMESTAMP_FILE": ft,
                "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}


def test_restore_refilled(h):
    """Revisions taken back by the restore and refilled before any daemon's
    answer: only the daemons' own acknowledged writes show the restore."""
    etcd = Store(h)
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a", args=FAST).start()
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b", args=FAST).start()
    n = {d: decode(take(d.instance)[0])[1] for d in (a, b)}
    snap, restored_ok = snapshot(h, etcd)
    # each daemon has published a deadline past the mark the snapshot holds:
    # it got etcd's acknowledgement of a write made after the snapshot
    after = {d: hwm(etcd, "default", n[d]) for d in (a, b)}
    for d in (a, b):
        wait_for(lambda d=d: deadline_of(d.instance) > after[d], 10,
                 f"{d.name} to publish a mark written after the snapshot")
    seen = etcd.revision()
    etcd.restore(snap, refill_to=seen + 10)
    restored_ok()
    at_snap = {d: hwm(etcd, "default", n[d]) for d in (a, b)}
    assert etcd.revision() >= seen + 10, "the refill did not bring the revision back"
    for d in (a, b):
        wait_for(lambda d=d: state(d.instance) == "store-restored", 10,
                 f"{d.name} to see the restore")
        assert ("forgot a write it acknowledged" in d.log_text() or
                "does not know the lease" in d.log_text()), d.log_text()[-2000:]
    # the marks the restore took back are raised again to the deadlines the
    # daemons published (their clients go on up to them)
    for d in (a, b):
        published = deadline_of(d.instance)
        # read as restored, unless the daemon saw the restore and raised the
        # mark back before this test read it (its log says it read it lower)
        assert at_snap[d] < published or f"The mark of worker {n[d]} reads " in \
            d.log_text(), (at_snap[d], published, d.log_text()[-1500:])
        wait_for(lambda d=d, p=published: hwm(etcd, "default", n[d]) >= p, 5,
                 f"hwm/{n[d]} raised back to {published}")
    fence(etcd, "default")
    for d in (a, b):
        wait_for(lambda d=d: state(d.instance) not in ("store-restored", None), 10,
                 f"{d.name} to go on after the fence")
    ids = [take(d.instance, 5) for d in (a, b)]
    check_unique_and_increasing(ids)
    log(f"restore refilled to revision {seen + 10}: both daemons halted, marks "
        f"{at_snap[a]} and {at_snap[b]} as restored raised back; IDs again after the fence")
    for d in (a, b):
        assert d.stop() == 0


def test_move_after_restore(h):
    """A host whose clock steps back after a restore moves to a fresh number:
    the only free one is a number whose claim the restore forgot, and whose
    holder's clients still take IDs on it."""
    etcd = Store(h)
    make_cluster(h, etcd, "mv")
    ft, env = faked_wall_clock(h, "+0")
    args = ["--cluster", "mv"] + FAST + TINY
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a", env=env, args=args).start()
    na = tw(take(a.instance)[0])
    other = hwm(etcd, "mv", 1 - na)
    at_snap = hwm(etcd, "mv", na)
    snap, restored_ok = snapshot(h, etcd)
    # C claims the other number after the snapshot: the restore forgets it.
    # Its deadline 10 s ahead: its clients go on while it is stalled
    c = Daemon(h, etcd, instance=h.instance + "-c", name="c",
               args=args + ["--window", "10"]).start()
    nc = tw(take(c.instance)[0])
    assert nc == 1 - na
    ta = Taker(h, instance=a.instance, name="a", extra=RATE)
    tc = Taker(h, instance=c.instance, name="c", extra=RATE)
    after = hwm(etcd, "mv", na)
    wait_for(lambda: deadline_of(a.instance) > after, 10,
             "A to publish a mark written after the snapshot")
    # the restored mark of C's number behind A's clock once stepped back:
    # a number a move may take
    wait_for(lambda: id_time_now() - 2500 > other, 10, f"hwm/{nc} as restored to fall behind")
    seen = etcd.revision()
    c.signal(signal.SIGSTOP)  # stalled across the restore: C cannot claim first
    etcd.restore(snap, start=False)
    with open(ft, "w") as f:  # 2 s back: over the step-back threshold, a move
        f.write("-2\n")
    wait_for(lambda: "fresh worker number" in a.log_text(), 10, "A to move")
    etcd._refill(seen + 10)
    for i in range(etcd.n):
        etcd.start(i)
    etcd.wait_healthy()
    restored_ok()
    # A's clients on C's number (duplicates of C's clients' IDs), or A halted
    wait_for(lambda: state(a.instance) == "store-restored" or
             (ta.last_id() is not None and tw(ta.last_id()) == nc), 15,
             "A to halt or its clients to take IDs on C's number")
    c.signal(signal.SIGCONT)
    wait_for(lambda: state(c.instance) == "store-restored" or
             c.log_text().count("Publishing worker") > 1, 15, "C to halt or to claim again")
    ra, rc = ta.stop(), tc.stop()
    every = [i for ids in ta.ids() + tc.ids() for i in ids]
    log(f"{len(every) - len(set(every))} duplicate IDs among {len(every)}")
    total = check_unique_and_increasing(ta.ids() + tc.ids())
    assert state(a.instance) == "store-restored", cli_status(a.instance)
    assert state(c.instance) == "store-restored", cli_status(c.instance)
    held = etcd.get(f"/snowid/mv/workers/{nc}")[0]
    assert held is None or a.instance not in held, f"A claimed {nc}: {held}"
    why = "its unknown lease" if "does not know the lease" in c.log_text() else "a forgotten write"
    log(f"move after a restore: {total} IDs unique ({ra['ids']} on A, {rc['ids']} on C); "
        f"A halted on its forgotten mark, C on {why}")
    a.stop()
    c.stop()


def test_new_token_before_fence(h):
    """The procedure's restore (a new cluster token, so a new cluster ID): a
    daemon that starts on it before `snowid fence` claims nothing; the fence
    names the cluster ID it was written on."""
    etcd = Store(h)
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a", args=FAST).start()
    take(a.instance)
    old_id = etcd.header()["cluster_id"]
    assert stored_fence(etcd, "default").get("cluster_id") == old_id, \
        "the first daemon's fence does not name the cluster it was made on"
    snap, restored_ok = snapshot(h, etcd)
    etcd.restore(snap, new_token=True)
    restored_ok()
    new_id = etcd.header()["cluster_id"]
    assert new_id != old_id, "a new token did not make a new cluster ID"
    c = Daemon(h, etcd, instance=h.instance + "-c", name="c", args=FAST).start(wait_ready=False)
    wait_for(lambda: "fence was written on cluster" in c.log_text(), 10,
             "C to refuse the unfenced cluster")
    wait_for(lambda: state(a.instance) == "store-restored", 10, "A to see the restore")
    held = etcd.prefix("/snowid/default/workers/")
    assert not any(c.instance in v for v, _ in held.values()), f"C claimed: {held}"
    assert not c.has_message("READY=1")
    line = fence(etcd, "default")
    assert new_id in line, line
    assert stored_fence(etcd, "default")["cluster_id"] == new_id
    c.wait_message("READY=1", 15)
    ids = [take(a.instance, 5), take(c.instance, 5)]
    check_unique_and_increasing(ids)
    # a second fence on the same cluster ID says so; and, hours before the
    # first fence's lead can have slewed away, it starts above that lead too
    first = stored_fence(etcd, "default")
    r = cli("fence", *store_args(etcd), "--cluster", "default")
    assert r.returncode == 0, r.stderr
    assert "cluster ID" in r.stderr and "unchanged" in r.stderr, r.stderr
    second = stored_fence(etcd, "default")

    def lead(f):
        return f["claims_above"] - (f["era"] - EPOCH_MS)
    assert lead(second) >= lead(first) + 60000 - 1000, (first, second)
    log(f"second fence: lead {lead(first) / 1000:.1f} s, then {lead(second) / 1000:.1f} s")
    log(f"new token: cluster {old_id} -> {new_id}; C claimed nothing until the fence")
    a.stop()
    c.stop()


def test_stop_with_lowered_mark(h):
    """A holder stopped just after its mark was lowered by hand: the stop
    raises it back before giving the number up, so the next holder starts
    above every ID the stopped host's clients may still take."""
    etcd = Store(h)
    make_cluster(h, etcd, "st")
    args = ["--cluster", "st"] + FAST + TINY
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a", args=args).start()
    n = tw(take(a.instance)[0])
    hold_by_third_party(etcd, "st", 1 - n)
    # B waits for A's number
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b", args=args).start(wait_ready=False)
    ta = Taker(h, instance=a.instance, name="a", extra=RATE)
    wait_for(lambda: ta.last_id() is not None, 5, "A's clients to take IDs")
    low = decode(ta.last_id(), 1)[0] - 5000
    etcd.put(f"/snowid/st/hwm/{n}", mark(low))
    a.signal(signal.SIGTERM)
    assert a.proc.wait(timeout=10) == 0
    b.wait_message("READY=1", 15)
    tb = Taker(h, instance=b.instance, name="b", extra=RATE)
    # A's clients until A's deadline, B's beside them
    wait_for(lambda: tb.last_id() is not None, 5, "B's clients to take IDs")
    wait_for(lambda: deadline_passed(a.instance), 10, "A's clients past A's deadline")
    ra, rb = ta.stop(), tb.stop()
    total = check_unique_and_increasing(ta.ids() + tb.ids())
    assert "confirmed" in a.log_text(), a.log_text()[-2000:]
    log(f"stop with hwm/{n} lowered to {low}: {total} IDs unique ({ra['ids']} on A, "
        f"{rb['ids']} on B)")
    b.stop()


def test_forgotten_write_rewritten(h):
    """A restore that kept its cluster ID forgot B's claim (its lease and
    its mark writes came after the snapshot); another daemon's claim then
    rewrote B's number at a higher revision, so the mark's revision alone
    no longer shows the forgotten write.  B, whose lease had time left, must
    name a restore and halt, not take the lease for one revoked early and
    claim again."""
    etcd = Store(h)
    make_cluster(h, etcd, "fw")
    hold_by_third_party(etcd, "fw", 1)   # number 0 the only one to claim
    snap, restored_ok = snapshot(h, etcd)
    # B's lease lives long: its stall below is within its TTL, so that its
    # keepalive finds the lease unknown, not expired
    args = ["--cluster", "fw", "--lease-ttl", "30", "--window", "3", "--renew-interval", "500",
            "--etcd-timeout", "1000"] + TINY
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b", args=args).start()
    assert tw(take(b.instance)[0]) == 0
    after = hwm(etcd, "fw", 0)
    wait_for(lambda: deadline_of(b.instance) > after, 10,
             "B to publish a mark written after the snapshot")
    seen = etcd.revision()
    b.signal(signal.SIGSTOP)   # B stalls across the restore and C's claim
    h.cleanup(lambda: b.signal(signal.SIGCONT))
    etcd.restore(snap, refill_to=seen + 10)
    restored_ok()
    c = Daemon(h, etcd, instance=h.instance + "-c", name="c", args=args).start()
    assert tw(take(c.instance)[0]) == 0, "C did not claim B's number"
    _, kv = etcd.get("/snowid/fw/hwm/0")
    assert int(kv["mod_revision"]) > seen, "C's claim did not rewrite the mark past B's write"
    b.signal(signal.SIGCONT)
    wait_for(lambda: state(b.instance) == "store-restored" or
             "Lost worker number" in b.log_text(), 15, "B to halt, or to give its number up")
    assert state(b.instance) == "store-restored", \
        (cli_status(b.instance), b.log_text()[-2500:])
    assert "revoked before its TTL ran out" not in b.log_text(), b.log_text()[-2500:]
    assert "restored" in b.log_text(), b.log_text()[-2500:]
    held = etcd.get("/snowid/fw/workers/0")[0]
    assert held is not None and b.instance not in held, f"B claimed again: {held}"
    log("a forgotten write rewritten by another daemon's claim: B halted as restored")
    c.stop()
    b.stop()


def test_start_just_after_fence(h):
    """A daemon that starts just after a fence, beside a live host that runs
    past the fence's clock bound and has not yet seen the fence: it claims
    only once a live host can have seen the fence and raised its mark, so
    its first ID is above every deadline that host published."""
    etcd = Store(h)
    make_cluster(h, etcd, "sf")
    hold_by_third_party(etcd, "sf", 1)   # number 0 the only one to claim
    snap, restored_ok = snapshot(h, etcd)
    # A's clock 90 s ahead: past what a fence with the default --ahead
    # (60 s + window + mark-step) covers; its claim comes after the snapshot
    _, env = faked_wall_clock(h, "+90")
    args = ["--cluster", "sf"] + FAST + TINY
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a", env=env, args=args).start()
    assert tw(take(a.instance)[0]) == 0
    published = deadline_of(a.instance)   # at least: it may extend before the stop
    a.signal(signal.SIGSTOP)   # A sees neither the restore nor the fence yet
    h.cleanup(lambda: a.signal(signal.SIGCONT))
    etcd.restore(snap, new_token=True)
    restored_ok()
    fence(etcd, "sf")
    above = stored_fence(etcd, "sf")["claims_above"]
    assert above < published, f"the fence covers A ({above} >= {published}): no gap to test"
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b", args=args).start(wait_ready=False)
    a.signal(signal.SIGCONT)   # A, live, sees the fence and raises its mark
    wait_for(lambda: (hwm(etcd, "sf", 0) or 0) >= published, 10,
             f"A to raise hwm/0 to its deadline {published}")
    published = deadline_of(a.instance)   # halted: no more extensions
    wait_for(lambda: hwm(etcd, "sf", 0) >= published, 10,
             f"A to raise hwm/0 to its last deadline {published}")
    a.signal(signal.SIGSTOP)   # and claims nothing more
    b.wait_message("READY=1", 30)
    first = tt(take(b.instance)[0])
    log(f"a daemon started just after a fence: first ID at {first}, the live host's "
        f"deadline {published}, claims_above {above}")
    assert first > published, (first, published, b.log_text()[-2000:])
    b.stop()
    a.signal(signal.SIGCONT)
    a.stop()


def test_restore_to_snapshot_without_cluster(h):
    """etcd restored, with a new token as the procedure says, from a snapshot
    taken before the cluster was made.  A, which knew the cluster, halts and
    leaves a witness; B and C, started before `snowid fence`, find it and do
    not make the cluster anew; the fence covers A's deadline and its
    fence's lead, so the number B or C claims of A's starts above every ID
    A's clients take until A's deadline."""
    etcd = Store(h)
    snap, restored_ok = snapshot(h, etcd)   # no cluster in it
    args = ["--cluster", "nc"] + FAST + TINY
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a", args=args).start()
    na = tw(take(a.instance)[0])
    ta = Taker(h, instance=a.instance, name="a", extra=RATE)
    wait_for(lambda: ta.last_id() is not None, 5, "A's clients to take IDs")
    etcd.restore(snap, new_token=True)
    restored_ok()
    assert etcd.get("/snowid/nc/layout")[0] is None, "the snapshot holds the cluster"
    wait_for(lambda: etcd.prefix("/snowid/nc/witness/"), 10, "A's witness")
    wait_for(lambda: "Left a witness" in a.log_text(), 5, "A to say so")
    published = deadline_of(a.instance)   # halted: extends no more
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b", args=args).start(wait_ready=False)
    c = Daemon(h, etcd, instance=h.instance + "-c", name="c", args=args).start(wait_ready=False)
    for d in (b, c):
        wait_for(lambda d=d: "left a witness" in d.log_text(), 10, f"{d.name} to refuse")
    assert etcd.get("/snowid/nc/layout")[0] is None, "the cluster was made anew"
    line = fence(etcd, "nc", *TINY)
    assert "1 witnesses" in line, line
    assert not etcd.prefix("/snowid/nc/witness/"), "the fence left the witness"
    above = stored_fence(etcd, "nc")["claims_above"]
    assert above >= published, (above, published)
    b.wait_message("READY=1", 30)
    c.wait_message("READY=1", 30)
    firsts = {d.name: take(d.instance)[0] for d in (b, c)}
    on_a = [d for d in (b, c) if tw(firsts[d.name]) == na]
    assert len(on_a) == 1, f"neither B nor C claimed A's number {na}: {firsts}"
    tb = Taker(h, instance=on_a[0].instance, name=on_a[0].name, extra=RATE)
    wait_for(lambda: tb.last_id() is not None, 5, "the new holder's clients to take IDs")
    wait_for(lambda: deadline_passed(a.instance), 15, "A's clients past A's deadline")
    ra, rb = ta.stop(), tb.stop()
    first = min(tt(i) for i in firsts.values())
    log(f"a snapshot without the cluster, A live: B and C waited for the fence; "
        f"claims_above {above}, first ID {first}, A's deadline {published}; "
        f"{ra['ids']} IDs on A, {rb['ids']} on {on_a[0].name}")
    assert first > published, (first, published)
    total = check_unique_and_increasing(ta.ids() + tb.ids())
    log(f"{total} IDs unique")
    for d in (a, b, c):
        d.stop()


def test_snapshot_without_cluster_stalled(h):
    """The same restore, with A stalled across it, so that it leaves no
    witness: B makes the cluster anew, and a cluster is made above the clock
    bound a fence claims above, so B's first ID is above A's deadline."""
    etcd = Store(h)
    snap, restored_ok = snapshot(h, etcd)   # no cluster in it
    make_cluster(h, etcd, "ns")   # made long ago: no lead left
    args = ["--cluster", "ns"] + FAST + TINY
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a", args=args).start()
    na = tw(take(a.instance)[0])
    ta = Taker(h, instance=a.instance, name="a", extra=RATE)
    wait_for(lambda: ta.last_id() is not None, 5, "A's clients to take IDs")
    a.signal(signal.SIGSTOP)
    h.cleanup(lambda: a.signal(signal.SIGCONT))
    published = hwm(etcd, "ns", na)   # at or above every deadline A published
    etcd.restore(snap, new_token=True)
    restored_ok()
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b", args=args).start()
    c = Daemon(h, etcd, instance=h.instance + "-c", name="c", args=args).start()
    made = stored_fence(etcd, "ns")
    assert made.get("made") is True, made
    firsts = {d.name: take(d.instance)[0] for d in (b, c)}
    on_a = [d for d in (b, c) if tw(firsts[d.name]) == na]
    assert len(on_a) == 1, f"neither B nor C claimed A's number {na}: {firsts}"
    tb = Taker(h, instance=on_a[0].instance, name=on_a[0].name, extra=RATE)
    a.signal(signal.SIGCONT)
    wait_for(lambda: tb.last_id() is not None, 5, "the new holder's clients to take IDs")
    wait_for(lambda: deadline_passed(a.instance), 15, "A's clients past A's deadline")
    ra, rb = ta.stop(), tb.stop()
    log(f"a snapshot without the cluster, A stalled: made anew with claims_above "
        f"{made['claims_above']} ({made['claims_above'] - id_time_now()} ms from the clock), "
        f"A's deadline {published}; {ra['ids']} IDs on A, {rb['ids']} on {on_a[0].name}")
    assert made["claims_above"] > published, (made, published)
    total = check_unique_and_increasing(ta.ids() + tb.ids())
    log(f"{total} IDs unique")
    for d in (a, b, c):
        d.stop()


def test_fence_after_lost_fence(h):
    """etcd restored from a snapshot taken before the last fence: X claimed
    under the lost fence, so its clock runs that fence's lead ahead, and it
    is stalled across the new fence.  The store cannot show the lost lead:
    `snowid fence` refuses without --lost-lead, and with the lead the lost
    fence printed it claims above X's deadline, where the fence the snapshot
    holds alone would not."""
    etcd = Store(h)
    make_cluster(h, etcd, "lf")
    hold_by_third_party(etcd, "lf", 1)   # number 0 the only one to claim
    # a window long enough that X's deadline is still ahead when it is fenced
    win = ["--window", "30"]
    fence(etcd, "lf", *win)
    snap, restored_ok = snapshot(h, etcd)   # holds that fence, not the next
    lost = fence_lead_ms(fence(etcd, "lf", *win))
    assert lost is not None, "the fence printed no lead"
    args = ["--cluster", "lf"] + FAST + TINY + NO_STEP + win
    x = Daemon(h, etcd, instance=h.instance + "-x", name="x", args=args).start()
    assert tw(take(x.instance)[0]) == 0
    tx = Taker(h, instance=x.instance, name="x", extra=RATE)
    wait_for(lambda: tx.last_id() is not None, 5, "X's clients to take IDs")
    wait_for(lambda: (hwm(etcd, "lf", 0) or 0) >= deadline_of(x.instance), 5,
             "X's deadline to be marked")
    x.signal(signal.SIGSTOP)   # X sees neither the restore nor the fence
    h.cleanup(lambda: x.signal(signal.SIGCONT))
    published = hwm(etcd, "lf", 0)   # at or above every deadline X published
    etcd.restore(snap, new_token=True)
    restored_ok()
    before = stored_fence(etcd, "lf")
    r = cli("fence", *store_args(etcd), "--cluster", "lf", *win)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "--lost-lead" in r.stderr and "not fenced" in r.stderr, r.stderr
    assert stored_fence(etcd, "lf") == before, "a refused fence wrote a fence"
    line = fence(etcd, "lf", *win, "--lost-lead", str(lost))
    above = stored_fence(etcd, "lf")["claims_above"]
    m = re.search(r"([0-9.]+) s the last fence's lead", line)
    assert m, line
    alone = above - lost + int(float(m.group(1)) * 1000)   # the snapshot's fence's lead instead
    log(f"lost fence's lead {lost} ms; X's deadline {published}; claims_above {above} "
        f"(with the snapshot's fence alone {alone}): {line.strip()}")
    assert alone < published, "the snapshot's fence alone covers X: no gap to test"
    assert above > published, (above, published)
    b = Daemon(h, etcd, instance=h.instance + "-b", name="b", args=args).start()
    assert tw(take(b.instance)[0]) == 0
    tb = Taker(h, instance=b.instance, name="b", extra=RATE)
    x.signal(signal.SIGCONT)   # X's clients go on to its deadline
    wait_for(lambda: tb.last_id() is not None, 5, "B's clients to take IDs")
    wait_for(lambda: deadline_passed(x.instance), 45, "X's clients past X's deadline")
    rx, rb = tx.stop(), tb.stop()
    total = check_unique_and_increasing(tx.ids() + tb.ids())
    log(f"a fence over a lost fence: {total} IDs unique ({rx['ids']} on X, {rb['ids']} on B)")
    b.stop()
    x.stop()


def test_lost_fence_witnessed(h):
    """The restore of test_fence_after_lost_fence, with W running beside X:
    W, live, halts on the restore and leaves a witness of the fence it knew,
    the lost one, so `snowid fence` needs no --lost-lead, and covers X."""
    etcd = Store(h)
    make_cluster(h, etcd, "lw")
    fence(etcd, "lw")
    snap, restored_ok = snapshot(h, etcd)
    fence(etcd, "lw")   # lost with the restore
    args = ["--cluster", "lw"] + FAST + TINY + NO_STEP
    x = Daemon(h, etcd, instance=h.instance + "-x", name="x", args=args).start()
    w = Daemon(h, etcd, instance=h.instance + "-w", name="w", args=args).start()
    nx = tw(take(x.instance)[0])
    tx = Taker(h, instance=x.instance, name="x", extra=RATE)
    wait_for(lambda: tx.last_id() is not None, 5, "X's clients to take IDs")
    wait_for(lambda: (hwm(etcd, "lw", nx) or 0) >= deadline_of(x.instance), 5,
             "X's deadline to be marked")
    x.signal(signal.SIGSTOP)
    h.cleanup(lambda: x.signal(signal.SIGCONT))
    published = hwm(etcd, "lw", nx)   # at or above every deadline X published
    etcd.restore(snap, new_token=True)
    restored_ok()
    wait_for(lambda: etcd.prefix("/snowid/lw/witness/"), 10, "W's witness")
    r = cli("fence", *store_args(etcd), "--cluster", "lw")
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    above = stored_fence(etcd, "lw")["claims_above"]
    log(f"X's deadline {published}; claims_above {above}: {r.stdout.strip()}")
    assert "1 witnesses" in r.stdout, r.stdout
    assert above > published, (above, published)
    x.signal(signal.SIGCONT)
    x.stop()
    w.stop()


def test_lease_revoked_by_hand(h):
    """A lease revoked before its TTL ran out, with the holder's own writes
    all there: not a restore (etcd's own leaders have revoked leases early),
    so the holder claims again and never halts."""
    etcd = Store(h)
    a = Daemon(h, etcd, instance=h.instance + "-a", name="a", args=FAST).start()
    n = decode(take(a.instance)[0])[1]
    _, kv = etcd.get(f"/snowid/default/workers/{n}")
    etcd.revoke(kv["lease"])
    # its keepalive finds the lease unknown early and reads its mark, or its
    # extension finds workers/<n> gone with its mark write intact: either
    # way, a number lost, not a restore
    wait_for(lambda: a.log_text().count("Publishing worker") > 1, 10, "A to claim again")
    assert state(a.instance) != "store-restored", cli_status(a.instance)
    assert "restored" not in a.log_text(), a.log_text()
    take(a.instance, 5)
    log("lease revoked by hand: the holder read its mark, claimed again, did not halt")
    a.stop()


def test_dump_to_another_server(h):
    """PostgreSQL: a dump restored into another server (another system
    identifier) gets a new cluster ID, so a daemon that starts on it before
    `snowid fence` claims nothing."""
    src = Store(h)
    a = Daemon(h, src, instance=h.instance + "-a", name="a", args=FAST).start()
    take(a.instance)
    old_id = src.header()["cluster_id"]
    assert stored_fence(src, "default").get("cluster_id") == old_id
    path = h.path("dump.sql")
    src.snapshot_save(path)
    assert a.stop() == 0
    dst = PgStore(h)
    dst.restore(path)
    c = Daemon(h, dst, instance=h.instance + "-c", name="c", args=FAST).start(wait_ready=False)
    wait_for(lambda: "fence was written on cluster" in c.log_text(), 15,
             "C to refuse the unfenced copy")
    new_id = dst.header()["cluster_id"]
    assert new_id != old_id, "the copy on another server kept its cluster ID"
    held = dst.prefix("/snowid/default/workers/")
    assert not any(c.instance in v for v, _ in held.values()), f"C claimed: {held}"
    line = fence(dst, "default")
    assert new_id in line, line
    c.wait_message("READY=1", 15)
    take(c.instance, 5)
    log(f"dump on another server: cluster {old_id} -> {new_id}; C claimed nothing until "
        f"the fence")
    c.stop()


def test_old_data_directory(h):
    """PostgreSQL: an old copy of the data directory (a base backup) put
    back on the same server.  The system identifier and timeline are the
    same, so only the daemon's own acknowledged writes show the restore: it
    halts as restored before any fence, and takes IDs again after it."""
    pg = Store(h)
    a = Daemon(h, pg, instance=h.instance + "-a", name="a", args=FAST).start()
    n = decode(take(a.instance)[0])[1]
    ident = pg.pg.psql("SELECT system_identifier FROM pg_control_system()").strip()
    copy = os.path.join(pg.pg.dir, "copy")
    pg.pg._as_owner(["pg_basebackup", "-d", pg.conninfo, "-D", copy, "-X", "fetch", "-c", "fast",
                     "--no-sync"])
    # read once the copy ended: at or above the mark the copy holds
    after = hwm(pg, "default", n)
    wait_for(lambda: deadline_of(a.instance) > after, 10,
             "A to publish a mark written after the copy")
    # A stopped while the copy is put back and its mark read: A raises a
    # mark it finds below what it published as soon as it reconnects
    a.proc.send_signal(signal.SIGSTOP)
    try:
        pg.kill()
        shutil.rmtree(pg.pg.data)
        subprocess.run(["cp", "-a", copy, pg.pg.data], check=True)
        pg.start()
        # the same server: the identifier, which tells another server, is kept
        assert pg.pg.psql("SELECT system_identifier FROM pg_control_system()").strip() == ident
        at_copy = hwm(pg, "default", n)
    finally:
        a.proc.send_signal(signal.SIGCONT)
    assert at_copy <= after, (at_copy, after)
    wait_for(lambda: state(a.instance) == "store-restored", 20, "A to see the restore")
    assert ("forgot a write it acknowledged" in a.log_text() or
            "does not know the lease" in a.log_text()), a.log_text()[-2000:]
    published = deadline_of(a.instance)
    fence(pg, "default")
    wait_for(lambda: state(a.instance) not in ("store-restored", None), 15,
             "A to go on after the fence")
    ids = take(a.instance, 5)
    assert all(decode(i)[0] > published for i in ids), (published, [decode(i)[0] for i in ids])
    check_unique_and_increasing([ids])
    log(f"old data directory put back (system identifier {ident} kept): A halted as "
        f"restored, mark {at_copy} as copied below its deadline {published}; IDs again "
        f"after the fence")
    assert a.stop() == 0

if __name__ == "__main__":
    import sys
    tests = [test_restore_refilled, test_move_after_restore, test_new_token_before_fence,
             test_stop_with_lowered_mark, test_lease_revoked_by_hand,
             test_forgotten_write_rewritten, test_start_just_after_fence,
             test_restore_to_snapshot_without_cluster, test_snapshot_without_cluster_stalled,
             test_fence_after_lost_fence, test_lost_fence_witnessed]
    if STORE == "postgres":
        tests = [test_restore_refilled, test_stop_with_lowered_mark, test_lease_revoked_by_hand,
                 test_dump_to_another_server, test_forgotten_write_rewritten,
                 test_old_data_directory]
    run([t for t in tests if len(sys.argv) < 2 or t.__name__ in sys.argv[1:]])
