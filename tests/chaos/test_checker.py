# SPDX-License-Identifier: MIT
"""The chaos test's checker must be able to fail: each kind of wrong ID it
looks for is planted in files of made-up IDs and must be found; and etcd
history is turned into the right holdings, across restores of etcd from a
snapshot and deleted marks; and PostgreSQL's audit rows (of its numbers'
table) are turned into the same history."""
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos  # noqa: E402


def make_id(t, worker, seq):
    return (t << 22) | (worker << 12) | seq


class FakeHost:
    def __init__(self, i, d, lists):
        self.i = i
        self.name = f"h{i}"
        self.files = []
        for n, ids in enumerate(lists):
            path = os.path.join(d, f"h{i}.{n}")
            np.array(ids, dtype=np.uint64).tofile(path)
            self.files.append((f"h{i}.{n}", path))

    def id_files(self):
        return self.files


def history():
    p = "/snowid/chaos/"
    claim = lambda inst: json.dumps({"instance": inst})  # noqa: E731
    return [
        (2, "PUT", p + "layout", "{}"),
        (3, "PUT", p + "workers/5", claim("a")), (3, "PUT", p + "hwm/5", "00000000000000001010"),
        (4, "PUT", p + "hwm/5", "00000000000000001020"),
        (5, "DELETE", p + "workers/5", ""),
        (6, "PUT", p + "workers/5", claim("b")), (6, "PUT", p + "hwm/5", "00000000000000001030"),
        (7, "PUT", p + "workers/7", claim("a")), (7, "PUT", p + "hwm/7", "00000000000000002000"),
    ], p


def mark(v):
    return f"{v:020d}"


def restored():
    """Two eras: etcd restored from a snapshot at revision 4.  a held 5 and
    raised its mark twice after the snapshot, b claimed 9; both lost.  After
    the restore and the fence, a claims 9 and b claims 5; a never raised 5's
    mark again (it was cut off, say)."""
    p = "/snowid/chaos/"
    claim = lambda inst: json.dumps({"instance": inst})  # noqa: E731
    common = [
        (2, "PUT", p + "layout", "{}"), (2, "PUT", p + "fence", '{"token": "t1"}'),
        (2, "PUT", p + "floor", mark(0)),
        (3, "PUT", p + "workers/5", claim("a")), (3, "PUT", p + "hwm/5", mark(1010)),
        (3, "PUT", p + "floor", mark(1010)),
        (4, "PUT", p + "hwm/5", mark(1020)), (4, "PUT", p + "floor", mark(1020)),
    ]
    era0 = common + [
        (5, "PUT", p + "hwm/5", mark(1030)), (6, "PUT", p + "hwm/5", mark(1040)),
        # the claim's mark first, then workers/: the same transaction all the same
        (7, "PUT", p + "hwm/9", mark(3000)), (7, "PUT", p + "workers/9", claim("b")),
        (7, "PUT", p + "floor", mark(3000)),
    ]
    era1 = common + [
        (5, "PUT", p + "fence", '{"token": "t2", "claims_above": 3063}'),
        (6, "DELETE", p + "workers/5", ""),  # a's restored lease expires
        (7, "PUT", p + "workers/9", claim("a")), (7, "PUT", p + "hwm/9", mark(3100)),
        (8, "PUT", p + "workers/5", claim("b")), (8, "PUT", p + "hwm/5", mark(3200)),
    ]
    return [(0, era0), (4, era1)], p


def deleted():
    """One era: a's mark of 7 deleted while a holds 7, raised again by a,
    renewed; then a gives 7 up, its mark is deleted while nobody holds 7, the
    layout is deleted and fenced again, and b claims 7 (above the floor)."""
    p = "/snowid/chaos/"
    claim = lambda inst: json.dumps({"instance": inst})  # noqa: E731
    return [
        (2, "PUT", p + "layout", "{}"), (2, "PUT", p + "floor", mark(0)),
        (3, "PUT", p + "workers/7", claim("a")), (3, "PUT", p + "hwm/7", mark(2000)),
        (4, "PUT", p + "hwm/7", mark(2010)),
        (5, "DELETE", p + "hwm/7", ""),
        (6, "PUT", p + "hwm/7", mark(2010)), (6, "PUT", p + "floor", mark(2010)),
        (7, "PUT", p + "hwm/7", mark(2020)), (7, "PUT", p + "floor", mark(2020)),
        (8, "DELETE", p + "workers/7", ""),
        (9, "DELETE", p + "hwm/7", ""),
        (10, "DELETE", p + "layout", ""),
        (11, "PUT", p + "layout", "{}"), (11, "PUT", p + "fence", '{"token": "t2"}'),
        (12, "PUT", p + "workers/7", claim("b")), (12, "PUT", p + "hwm/7", mark(4000)),
        (12, "PUT", p + "floor", mark(4000)),
    ], p


def run(lists_a, lists_b, fresh=(0, 0), hist=history):
    with tempfile.TemporaryDirectory() as d:
        hosts = [FakeHost(0, d, lists_a), FakeHost(1, d, lists_b)]
        events, prefix = hist()
        held = chaos.holdings(events, prefix, ["a", "b"])
        return chaos.check_ids(hosts, held, {0: fresh[0], 1: fresh[1]})


def main():
    print("checker: wrong IDs are planted below; each must be reported", flush=True)
    events, prefix = history()
    held = chaos.holdings(events, prefix, ["a", "b"])
    assert held == {0: [(5, 0, 1020), (7, 0, 2000)], 1: [(5, 1020, 1030)]}, held

    good_a = [[make_id(1000, 5, 0), make_id(1000, 5, 1), make_id(1500, 7, 0)]]
    good_b = [[make_id(1021, 5, 0), make_id(1030, 5, 0)]]
    assert run(good_a, good_b) == (5, 0, 0, 0)

    # the same ID from both hosts: a duplicate, and outside b's holding
    assert run(good_a, [[make_id(1000, 5, 1)]]) == (4, 1, 0, 1)
    # a thread going back on the same worker
    assert run([[make_id(1001, 5, 0), make_id(1000, 5, 0)]], good_b)[2] == 1
    # going back on another worker: only after a move to a fresh number
    back = [[make_id(1900, 7, 0), make_id(1000, 5, 0)]]
    assert run(back, good_b)[2] == 1
    assert run(back, good_b, fresh=(1, 0))[2] == 0
    # b's ID past the mark of its holding
    assert run(good_a, [[make_id(1031, 5, 0)]])[3] == 1
    # a's ID in b's holding
    assert run([[make_id(1025, 5, 0)]], good_b)[3] == 1

    # across a restore: a's marks of 5 written after the snapshot were lost
    # but acknowledged, so a's holding of 5 runs to 1040, and b's claim of 5
    # after the restore starts above it; b's lost claim of 9 fences a's
    eras, prefix = restored()
    assert chaos.timeline(eras)[1] == []
    held = chaos.holdings(eras, prefix, ["a", "b"])
    assert held == {0: [(5, 0, 1040), (9, 3000, 3100)], 1: [(9, 0, 3000), (5, 1040, 3200)]}, held
    # the last era alone would have lost a's last marks
    assert chaos.holdings(eras[-1][1], prefix, ["a", "b"])[0][0] == (5, 0, 1020)
    a_ok = [[make_id(1035, 5, 0), make_id(1040, 5, 0), make_id(3050, 9, 0)]]
    b_ok = [[make_id(2500, 9, 0), make_id(3000, 9, 0), make_id(1041, 5, 0)]]
    assert run(a_ok, b_ok, fresh=(0, 1), hist=restored) == (6, 0, 0, 0)
    # a past its last acknowledged mark of 5
    assert run([[make_id(1041, 5, 1)]], b_ok, fresh=(0, 1), hist=restored)[3:] == (1,)
    # b in a's lost range of 5, a in b's lost range of 9
    assert run(a_ok, [[make_id(1035, 5, 1)]], hist=restored)[3] == 1
    assert run([[make_id(2999, 9, 0)]], b_ok, fresh=(0, 1), hist=restored)[3] == 1
    # a restored era that does not repeat its snapshot's past is reported
    bad = [eras[0], (4, [e for e in eras[1][1] if e[0] != 3])]
    assert len(chaos.timeline(bad)[1]) == 1

    # a deleted mark: raised again by its holder; deleted again while 7 is
    # free, it still fences 7 (b's claim starts above the floor)
    events, prefix = deleted()
    held = chaos.holdings(events, prefix, ["a", "b"])
    assert held == {0: [(7, 0, 2020)], 1: [(7, 2020, 4000)]}, held
    assert run([[make_id(2015, 7, 0)]], [[make_id(4000, 7, 0)]], hist=deleted) == (2, 0, 0, 0)
    # b's IDs below the deleted mark are outside its holding
    assert run([[make_id(2015, 7, 0)]], [[make_id(1500, 7, 0)]], hist=deleted)[3] == 1

    # the stretch with no ID anywhere: where every client is in a gap at once
    assert chaos.longest_stretch([[(10, 50)], [(20, 60), (70, 80)]], 0, 100) == (30, 20)
    assert chaos.longest_stretch([[(10, 50)], []], 0, 100) == (0, 0)
    # the slowest return of IDs: the fault on h0 ended at 30, IDs at 60
    per_host = {"h0": [[(10, 60)], [(20, 60)]], "h1": [[(0, 5)]]}
    healed = [(0, "drop-long", 30), (1, "daemon-kill9", 50)]
    assert chaos.recoveries(healed, [], per_host, 0, 100) == (
        [(30, "drop-long", "h0", 30), (0, "daemon-kill9", "h1", 50)], 0)
    # unless the host's next fault came first
    assert chaos.recoveries(healed, [(0, 40)], per_host, 0, 100) == (
        [(0, "daemon-kill9", "h1", 50)], 1)

    # PostgreSQL's audit rows (a write of a number's row each): a claim puts
    # the holder and the mark at the row's seq, a write of the mark alone
    # the mark, a deleted row deletes the mark; other clusters left out
    def row(seq, op, n, mark, rev, lease=None, holder=None, claim=False, cluster="chaos"):
        return [seq, op, cluster, n, mark, rev, lease, holder, claim]
    p = "/snowid/chaos/"
    rows = [row(1, "INSERT", 5, 0, 1),
            row(2, "UPDATE", 5, 1010, 3, 77, '{"instance":"a"}', True),
            row(3, "UPDATE", 5, 1010, 3, 77, '{"instance":"a"}'),   # no event: nothing moved
            row(4, "INSERT", 5, 1, 4, cluster="other"),
            row(5, "UPDATE", 5, 1020, 6, 77, '{"instance":"a"}'),
            row(6, "DELETE", 5, 1020, 6, 77, '{"instance":"a"}')]
    events, bad = chaos.audit_events(rows, p)
    assert bad == [] and events == [
        (1, "PUT", p + "hwm/5", "00000000000000000000"),
        (2, "PUT", p + "workers/5", '{"instance":"a"}'),
        (2, "PUT", p + "hwm/5", "00000000000000001010"),
        (5, "PUT", p + "hwm/5", "00000000000000001020"),
        (6, "DELETE", p + "hwm/5", "")], events
    # a mark's revision going back for one number is reported, not across numbers
    assert len(chaos.audit_events(rows + [row(7, "INSERT", 5, 2000, 5)], p)[1]) == 1
    assert chaos.audit_events(rows + [row(7, "INSERT", 6, 2000, 2)], p)[1] == []
    # the history they make is turned into holdings as etcd's is
    held = chaos.holdings(events + [(8, "PUT", p + "workers/5", '{"instance":"b"}'),
                                    (8, "PUT", p + "hwm/5", "00000000000000003000")],
                          p, ["a", "b"])
    assert held == {0: [(5, 0, 1020)], 1: [(5, 1020, 3000)]}, held
    # an era restored from a backup repeats part of the era before it (the
    # rows committed before the dump began, whatever their seq)
    era0 = events + [(7, "PUT", p + "hwm/6", "00000000000000000001")]
    era1 = [e for e in events if e[0] != 5] + [(9, "PUT", p + "hwm/5", "00000000000000004000")]
    assert chaos.timeline([(0, era0), (6, era1)], repeats_some=True)[1] == []
    assert len(chaos.timeline([(0, era0), (6, era1)])[1]) == 1
    assert len(chaos.timeline([(0, era0), (6, era1 + [(3, "PUT", p + "hwm/9", "1")])],
                              repeats_some=True)[1]) == 1
    print("checker: 30 checks passed")


if __name__ == "__main__":
    main()
