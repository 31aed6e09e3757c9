# SPDX-License-Identifier: MIT
"""Worker ranges (docs/regions.md): two regions, each with its own etcd, share
one ID space by claiming disjoint worker numbers; a full range; a range the
layout cannot hold; overlapping ranges recorded in one etcd are refused."""
import json
import os
import subprocess

from harness import (SNOWIDD, Daemon, Etcd, check_unique_and_increasing, cli, cli_status, decode,
                     fence, free_port, http_get, id_time_now, log, mark, run, take, wait_for)

CLUSTER = "ids"


class Region:
    """A directory of its own for a region's etcd (the harness names its
    data directories by member)."""

    def __init__(self, h, name):
        self.h = h
        self.dir = h.path(name)
        os.mkdir(self.dir)

    def path(self, p):
        return os.path.join(self.dir, p)

    def cleanup(self, fn):
        self.h.cleanup(fn)


def held(etcd, cluster=CLUSTER):
    return {int(k.rsplit("/", 1)[1]) for k in etcd.prefix(f"/snowid/{cluster}/workers/")}


def record(etcd, region, cluster=CLUSTER):
    v = etcd.get(f"/snowid/{cluster}/ranges/{region}")[0]
    return json.loads(v) if v is not None else None


def region_daemon(h, etcd, name, region, rng, extra=()):
    args = ["--cluster", CLUSTER, "--worker-range", rng] + (["--region", region] if region else [])
    return Daemon(h, etcd, instance=f"{h.instance}-{name}", name=name, args=args + list(extra))


def refused(d, what, timeout=20):
    """The daemon exits 78, never READY, with a line saying what."""
    d.start(wait_ready=False)
    rc = d.proc.wait(timeout=timeout)
    assert rc == 78, f"{d.name}: exit {rc}:\n{d.log_text()}"
    assert not d.has_message("READY=1"), f"{d.name} said READY before refusing"
    assert what in d.log_text(), f"{d.name}: no '{what}' in:\n{d.log_text()}"
    return [l for l in d.log_text().splitlines() if what in l][0]


def test_two_regions(h):
    """Two etcd clusters, one ID space: every number each region's daemons
    hold and every ID they issue lies in its own range."""
    eu_etcd, us_etcd = Etcd(Region(h, "eu")), Etcd(Region(h, "us"))
    port = free_port()
    eu = [region_daemon(h, eu_etcd, f"eu{i}", "eu", "0-3",
                        ["--http", f"127.0.0.1:{port}"] if i == 0 else []) for i in range(3)]
    us = [region_daemon(h, us_etcd, f"us{i}", "us", "4-7") for i in range(3)]
    for d in eu + us:
        d.start(wait_ready=False)
    for d in eu + us:
        d.wait_message("READY=1", 30)
    eu_held, us_held = held(eu_etcd), held(us_etcd)
    log(f"eu holds {sorted(eu_held)}, us holds {sorted(us_held)}")
    assert len(eu_held) == 3 and eu_held <= set(range(0, 4)), eu_held
    assert len(us_held) == 3 and us_held <= set(range(4, 8)), us_held
    assert record(eu_etcd, "eu") == {"from": 0, "to": 3}
    assert record(us_etcd, "us") == {"from": 4, "to": 7}
    # every ID of both regions: unique, and its worker in its region's range
    lists = []
    for d, rng in [(d, range(0, 4)) for d in eu] + [(d, range(4, 8)) for d in us]:
        ids = take(d.instance, 500)
        assert {decode(i)[1] for i in ids} <= set(rng), f"{d.name}: workers outside {rng}"
        lists.append(ids)
    assert check_unique_and_increasing(lists) == 3000
    assert len({i for ids in lists for i in ids}) == 3000
    # the range in snowid status and /v1/status
    assert cli_status(eu[1].instance).get("range") == "0-3", cli_status(eu[1].instance)
    assert cli_status(us[2].instance).get("range") == "4-7"
    r = cli("status", "--instance", us[0].instance, "--json")
    assert json.loads(r.stdout)["worker_range"] == {"from": 4, "to": 7}, r.stdout
    st, body = http_get(port, "/v1/status")
    assert st == 200, body
    j = json.loads(body)
    assert j["worker_range"] == {"from": 0, "to": 3} and j["region"] == "eu", j
    # docs/regions.md step 3: each region's record copied into the other's
    # etcd; a daemon of us configured into eu's numbers is then refused
    eu_rec = eu_etcd.get(f"/snowid/{CLUSTER}/ranges/eu")[0]
    us_etcd.put(f"/snowid/{CLUSTER}/ranges/eu", eu_rec)
    refused(region_daemon(h, us_etcd, "us-bad", "us", "3-5"), "overlaps 0-3 recorded by "
            "region 'eu'")
    assert record(us_etcd, "us") == {"from": 4, "to": 7}
    # snowid fence raises the floor past every mark, numbers outside this
    # region's range included (a mark of number 9 left 2 minutes ahead)
    ahead = id_time_now() + 120000
    eu_etcd.put(f"/snowid/{CLUSTER}/hwm/9", mark(ahead))
    claims = [d.log_text().count("Claimed worker number") for d in eu]
    fence(eu_etcd, CLUSTER, "--ahead", "0")
    floor = int(eu_etcd.get(f"/snowid/{CLUSTER}/floor")[0])
    assert floor >= ahead, f"floor {floor} below the mark {ahead} of a number outside the range"
    # the region's daemons claim again under the new fence, within their range
    wait_for(lambda: all(d.log_text().count("Claimed worker number") > n
                         for d, n in zip(eu, claims)), 30,
             "eu's daemons to claim again after the fence")
    wait_for(lambda: len(held(eu_etcd)) == 3, 30, "the old claims to be given up")
    assert held(eu_etcd) <= set(range(0, 4)), held(eu_etcd)
    for d in eu:
        assert all(decode(i)[1] in range(0, 4) for i in take(d.instance, 10))
    for d in eu + us:
        assert d.stop() == 0


def test_range_full(h):
    """Range 5-6 with three daemons: the third waits and says the range is
    full, and takes the number the first gives up."""
    etcd = Etcd(h)
    a, b, c = (region_daemon(h, etcd, n, None, "5-6") for n in ("a", "b", "c"))
    a.start()
    b.start()
    assert held(etcd) == {5, 6}, held(etcd)
    c.start(wait_ready=False)
    wait_for(lambda: "All 2 worker numbers are taken (range 5-6)" in c.log_text(), 20,
             "the third daemon to say its range is full")
    assert not c.has_message("READY=1") and c.proc.poll() is None
    n = cli_status(a.instance)["worker"]
    assert a.stop() == 0
    c.wait_message("READY=1", 40)
    assert cli_status(c.instance)["worker"] == n, "the third should take the freed number"
    assert held(etcd) == {5, 6}
    for d in (b, c):
        assert d.stop() == 0


def test_range_does_not_fit(h):
    def run_d(*args):
        return subprocess.run([SNOWIDD, "--config", "/dev/null", "--runtime-dir", h.rundir,
                               *args], capture_output=True, text=True, timeout=20)
    # bad forms, and a range the layout given in the settings cannot hold
    for args, what in ((["--worker-range", "5"], "FROM-TO"),
                       (["--worker-range", "6-5"], "FROM <= TO"),
                       (["--worker-range", "-1-3"], "FROM-TO"),
                       (["--worker-range", "zero-ten"], "FROM-TO"),
                       (["--region", "a/b"], "region"),
                       (["--worker-bits", "10", "--time-bits", "41", "--seq-bits", "12",
                         "--worker-range", "0-1024"], "does not fit 10 worker bits")):
        r = run_d("--check-config", *args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 78 and len(lines) == 1 and what in lines[0], \
            f"{args}: exit {r.returncode}: {r.stderr!r}"
    conf = h.path("snowidd.conf")
    with open(conf, "w") as f:
        f.write("worker-range = 10-20\nregion = eu\n")
    assert subprocess.run([SNOWIDD, "--config", conf, "--check-config"],
                          capture_output=True).returncode == 0
    with open(conf, "w") as f:
        f.write("worker-range = 20-10\n")
    r = subprocess.run([SNOWIDD, "--config", conf, "--check-config"], capture_output=True,
                       text=True)
    assert r.returncode == 78 and "snowidd.conf:1" in r.stderr, r.stderr

    etcd = Etcd(h)
    # the layout stored in etcd has 4 worker bits (numbers 0 to 15)
    small = ["--time-bits", "47", "--worker-bits", "4", "--seq-bits", "12"]
    s = Daemon(h, etcd, instance=h.instance + "-small", name="small",
               args=["--cluster", "small"] + small).start()
    line = refused(Daemon(h, etcd, instance=h.instance + "-wide", name="wide",
                          args=["--cluster", "small", "--worker-range", "10-20"]),
                   "does not fit the cluster's layout of 4 worker bits")
    log(line)
    assert record(etcd, "default", "small") == {"from": 0, "to": 15}
    # a cluster not made yet: a range the layout it would make cannot hold
    # makes nothing
    refused(Daemon(h, etcd, instance=h.instance + "-new", name="new",
                   args=["--cluster", "fresh", "--worker-range", "1000-1024"]),
            "does not fit the cluster's layout of 10 worker bits")
    assert etcd.prefix("/snowid/fresh/") == {}, etcd.prefix("/snowid/fresh/")
    assert s.stop() == 0


def test_overlap_refused(h):
    """Two regions' records in one etcd: a range overlapping another region's
    is refused; one of the same region (inside its record) is not."""
    etcd = Etcd(h)
    eu = region_daemon(h, etcd, "eu", "eu", "0-9").start()
    assert record(etcd, "eu") == {"from": 0, "to": 9}
    line = refused(region_daemon(h, etcd, "us-bad", "us", "5-14"), "overlaps")
    log(line)
    assert "region 'us'" in line and "region 'eu'" in line and "0-9" in line, line
    assert record(etcd, "us") is None, "a refused daemon must record nothing"
    us = region_daemon(h, etcd, "us", "us", "10-19").start()
    assert record(etcd, "us") == {"from": 10, "to": 19}
    assert int(cli_status(us.instance)["worker"]) in range(10, 20)
    # another daemon of region eu with a range inside eu's record
    eu2 = region_daemon(h, etcd, "eu2", "eu", "2-4").start()
    assert int(cli_status(eu2.instance)["worker"]) in range(2, 5)
    assert record(etcd, "eu") == {"from": 0, "to": 9}
    # one of region eu reaching into us's numbers
    refused(region_daemon(h, etcd, "eu3", "eu", "15-15"), "overlaps")
    # no range and no region: the whole space, which overlaps both
    refused(Daemon(h, etcd, instance=h.instance + "-plain", name="plain",
                   args=["--cluster", CLUSTER]), "overlaps")
    assert set(etcd.prefix(f"/snowid/{CLUSTER}/ranges/")) == \
        {f"/snowid/{CLUSTER}/ranges/eu", f"/snowid/{CLUSTER}/ranges/us"}
    # a damaged record of another region is said, not trusted, not fatal
    etcd.put(f"/snowid/{CLUSTER}/ranges/ap", "0-9")
    ok = region_daemon(h, etcd, "eu4", "eu", "6-7").start()
    assert "ranges/ap is not" in ok.log_text(), ok.log_text()
    for d in (eu, us, eu2, ok):
        assert d.stop() == 0


if __name__ == "__main__":
    run([test_two_regions, test_range_full, test_range_does_not_fit, test_overlap_refused])
