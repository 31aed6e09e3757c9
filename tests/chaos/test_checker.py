# SPDX-License-Identifier: MIT
"""The chaos test's checker must be able to fail: each kind of wrong ID it
looks for is planted in files of made-up IDs and must be found; and etcd
history is turned into the right holdings."""
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


def run(lists_a, lists_b, fresh=(0, 0)):
    with tempfile.TemporaryDirectory() as d:
        hosts = [FakeHost(0, d, lists_a), FakeHost(1, d, lists_b)]
        events, prefix = history()
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
    print("checker: 12 checks passed")


if __name__ == "__main__":
    main()
