# SPDX-License-Identifier: MIT
"""The chaos test: a 3-member etcd cluster and several hosts, each host a
network namespace of its own running snowidd and clients, while faults are
injected at random moments drawn from a seed.  At the end every ID taken is
checked: none twice, each client thread's IDs increasing, and each ID made
by a worker number its host held for that ID's time, by etcd's own history.

    chaos.py [--duration SEC] [--seed N] [--hosts N] [--build DIR] [--keep]

Needs root (ip netns).  Everything it makes (namespaces, processes,
segments) is removed however it ends; a failing run keeps its files and
prints the seed, with which the same faults are drawn again.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402
from harness import (Client, Daemon, Etcd, Harness, Taker, b64, kill_quietly, log,  # noqa: E402
                     unb64, wait_for)

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SUBNET = "10.231.0"
NS_PREFIX = "snowid-chaos-"
CLUSTER = "chaos"
LEASE_TTL_S = 4
WINDOW_S = 3
TIME_SHIFT = 22  # worker bits + sequence bits of the default layout
WORKER_MASK = 1023


def ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


class Net:
    """A bridge in a namespace of its own (where the etcd members listen) and
    one namespace per host, joined to it by a veth pair."""

    def __init__(self, hosts):
        self.tag = f"{NS_PREFIX}{os.getpid()}"
        self.core = f"{self.tag}-core"
        self.hosts = [f"{self.tag}-h{i}" for i in range(hosts)]
        self.made = []

    @staticmethod
    def remove_stale():
        """Namespaces left by a run that was killed outright."""
        for line in ip("netns", "list").stdout.splitlines():
            name = line.split()[0] if line.strip() else ""
            if not name.startswith(NS_PREFIX):
                continue
            pid = name[len(NS_PREFIX):].split("-")[0]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                Net.remove(name)

    @staticmethod
    def remove(ns):
        pids = ip("netns", "pids", ns, check=False).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGCONT)
                os.kill(int(p), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        ip("netns", "del", ns, check=False)

    def up(self):
        ip("netns", "add", self.core)
        self.made.append(self.core)
        ip("-n", self.core, "link", "set", "lo", "up")
        ip("-n", self.core, "link", "add", "br0", "type", "bridge")
        ip("-n", self.core, "link", "set", "br0", "up")
        for m in range(3):
            ip("-n", self.core, "addr", "add", f"{SUBNET}.{m + 1}/24", "dev", "br0")
        for i, ns in enumerate(self.hosts):
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", self.core, "link", "add", f"h{i}", "type", "veth", "peer", "name", "eth0",
               "netns", ns)
            ip("-n", self.core, "link", "set", f"h{i}", "master", "br0")
            ip("-n", self.core, "link", "set", f"h{i}", "up")
            ip("-n", ns, "addr", "add", f"{SUBNET}.{11 + i}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")

    def down(self):
        for ns in reversed(self.made):
            self.remove(ns)
        self.made = []

    def wrap(self, ns):
        return ["ip", "netns", "exec", ns]

    # the two ways a host is cut off from etcd
    def link(self, i, up):
        ip("-n", self.hosts[i], "link", "set", "eth0", "up" if up else "down")

    def blackhole(self, i, on):
        """Packets to the etcd members go to a MAC nobody has: silently lost."""
        for m in range(3):
            if on:
                ip("-n", self.hosts[i], "neigh", "replace", f"{SUBNET}.{m + 1}", "lladdr",
                   "02:00:00:00:de:ad", "nud", "permanent", "dev", "eth0")
            else:
                ip("-n", self.hosts[i], "neigh", "del", f"{SUBNET}.{m + 1}", "dev", "eth0",
                   check=False)


class Host:
    def __init__(self, h, net, etcd, i, faketime_lib):
        self.i = i
        self.name = f"h{i}"
        self.ns = net.hosts[i]
        self.instance = f"it-chaos{i}-{os.getpid()}"
        self.clock_file = h.path(f"faketime-h{i}")
        self.offset_s = 0.0
        self.set_clock(0.0)
        shim = os.path.join(harness.BUILD, "tests", "libtimerfd-shim.so")
        env = {"LD_PRELOAD": f"{shim} {faketime_lib}", "FAKETIME_TIMESTAMP_FILE": self.clock_file,
               "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
        self.daemon = Daemon(h, etcd, instance=self.instance, env=env, name=f"snowidd-h{i}",
                             wrap=net.wrap(self.ns),
                             args=["--cluster", CLUSTER, "--lease-ttl", str(LEASE_TTL_S),
                                   "--window", str(WINDOW_S), "--http", "127.0.0.1:7723",
                                   "--log-level", "info"])
        self.h = h
        self.net = net
        self.taker = None
        self.http = None
        self.busy_until = 0.0

    def set_clock(self, offset_s):
        self.offset_s = offset_s
        with open(self.clock_file + ".tmp", "w") as f:
            f.write(f"{offset_s:+.3f}\n")
        os.rename(self.clock_file + ".tmp", self.clock_file)

    def start_clients(self, rate):
        self.taker = Taker(self.h, instance=self.instance, threads=2, wait_us=100000,
                           name=f"h{self.i}-lib", wrap=self.net.wrap(self.ns),
                           extra=["-r", str(rate), "-g", "5"])
        out = self.h.path(f"ids-h{self.i}-http")
        self.http = Client(self.h, self.net.wrap(self.ns) + [
            sys.executable, os.path.join(HERE, "http_client.py"), "--port", "7723", "--out", out,
            "--gap-ms", "50"], f"http client h{self.i}")

    def stop_clients(self):
        return self.taker.stop(), self.http.stop()

    def id_files(self):
        return ([(f"h{self.i}-lib.{t}", f"{self.taker.prefix}.{t}") for t in range(2)]
                + [(f"h{self.i}-http", self.h.path(f"ids-h{self.i}-http.0"))])


class Chaos:
    KINDS = ["daemon-kill9", "daemon-sigstop", "link-down-short", "link-down-long",
             "drop-short", "drop-long", "etcd-kill", "etcd-kill-leader", "clock-step"]

    def __init__(self, h, net, etcd, hosts, rng, kinds=None):
        self.h, self.net, self.etcd, self.hosts, self.rng = h, net, etcd, hosts, rng
        self.kinds = kinds or self.KINDS
        self.heals = []  # (at, what, fn, host index or None, kind)
        self.healed = []  # (host index, kind, CLOCK_MONOTONIC ms): a host fault ended
        self.began = []  # (host index, CLOCK_MONOTONIC ms): a fault that stops a host began
        self.counts = {k: 0 for k in self.KINDS}
        self.etcd_busy = False
        self.start = time.monotonic()
        self.start_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    def note(self, msg):
        log(f"+{time.monotonic() - self.start:7.1f} s  {msg}")

    def later(self, delay, what, fn, host=None, kind=None):
        self.heals.append((time.monotonic() + delay, what, fn, host, kind))

    def heal_due(self, everything=False):
        now = time.monotonic()
        keep = []
        for heal in self.heals:
            at, what, fn, host, kind = heal
            if everything or at <= now:
                self.note(f"heal: {what}")
                fn()
                if host is not None:
                    self.healed.append((host, kind, time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                                        // 1000000))
            else:
                keep.append(heal)
        self.heals = keep

    def inject(self):
        """One fault, of a kind drawn among those that can be made now (one
        etcd member down at a time, one fault at a time on a host)."""
        rng = self.rng
        now = time.monotonic()
        free = [h for h in self.hosts if h.busy_until <= now]
        kinds = [k for k in self.kinds
                 if k == "clock-step" or (k.startswith("etcd") and not self.etcd_busy)
                 or (not k.startswith("etcd") and free)]
        if not kinds:
            return
        kind = rng.choice(kinds)
        host = rng.choice(self.hosts if kind == "clock-step" else free or self.hosts)
        if kind.startswith("etcd"):
            if kind == "etcd-kill-leader":
                lead = self.etcd.leader()
                if not lead:
                    return
                m = lead - 1
            else:
                m = rng.randrange(3)
            down = rng.uniform(0.5, 4)
            self.note(f"{kind}: member m{m}, restarted after {down:.1f} s")
            self.etcd.kill(m)
            self.etcd_busy = True

            def restart(m=m):
                self.etcd.start(m)
                self.etcd_busy = False
            self.later(down, f"etcd member m{m} restarted", restart)
        elif kind == "clock-step":
            scale = rng.choice(["ms", "s", "h"])
            mag = {"ms": rng.uniform(0.001, 0.999), "s": rng.uniform(1, 60),
                   "h": rng.uniform(1, 3) * 3600}[scale]
            step = mag if rng.random() < 0.5 else -mag
            if abs(host.offset_s + step) > 4 * 3600:
                step = -step
            self.note(f"{kind}: {host.name} clock {step:+.3f} s (now {host.offset_s + step:+.3f})")
            host.set_clock(host.offset_s + step)
        else:
            self.began.append((host.i, time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000))
            d = host.daemon
            if kind == "daemon-kill9":
                down = rng.uniform(0.1, 3)
                self.note(f"{kind}: {host.name}, restarted after {down:.1f} s")
                d.kill9()
                self.later(down, f"{host.name} daemon restarted",
                           lambda: d.start(wait_ready=False), host.i, kind)
            elif kind == "daemon-sigstop":
                down = LEASE_TTL_S + rng.uniform(1, 4)
                self.note(f"{kind}: {host.name} for {down:.1f} s (lease {LEASE_TTL_S} s)")
                d.signal(signal.SIGSTOP)
                self.later(down, f"{host.name} daemon continued",
                           lambda: d.signal(signal.SIGCONT), host.i, kind)
            else:
                short = kind.endswith("short")
                down = rng.uniform(0.2, WINDOW_S - 0.5) if short else WINDOW_S + rng.uniform(1, 6)
                cut = self.net.link if kind.startswith("link") else (
                    lambda i, up: self.net.blackhole(i, not up))
                self.note(f"{kind}: {host.name} cut off from etcd for {down:.1f} s "
                          f"(window {WINDOW_S} s)")
                cut(host.i, False)
                self.later(down, f"{host.name} reconnected", lambda: cut(host.i, True), host.i,
                           kind)
            host.busy_until = now + down + 0.5
        self.counts[kind] += 1

    def run(self, duration, mean_interval):
        end = time.monotonic() + duration
        next_at = time.monotonic() + self.rng.expovariate(1 / mean_interval)
        while time.monotonic() < end:
            self.heal_due()
            if time.monotonic() >= next_at:
                self.inject()
                next_at = time.monotonic() + self.rng.expovariate(1 / mean_interval)
            time.sleep(0.02)
        self.heal_due(everything=True)


def etcd_history(etcd, net):
    """Every event under the cluster's prefix since revision 1, from etcd's
    watch: a list of (revision, type, key, value)."""
    prefix = f"/snowid/{CLUSTER}/"
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    now = etcd.call("/v3/kv/range", {"key": b64(prefix), "range_end": b64(end), "limit": 1})
    head = int(now["header"]["revision"])
    body = json.dumps({"create_request": {"key": b64(prefix), "range_end": b64(end),
                                          "start_revision": 1}})
    p = subprocess.Popen(net.wrap(net.core) + ["curl", "-sN", "--max-time", "120",
                                               etcd.urls[0] + "/v3/watch", "-d", body],
                         stdout=subprocess.PIPE, text=True)
    events = []
    last = 0
    try:
        # one JSON answer a line; the answer that creates the watch carries the
        # current revision in its header, so only the events' own revisions
        # tell how far it has come (curl's --max-time bounds the wait)
        for line in p.stdout:
            for ev in json.loads(line).get("result", {}).get("events", []) if line.strip() else []:
                kv = ev["kv"]
                rev = int(kv.get("mod_revision", 0))
                events.append((rev, ev.get("type", "PUT"), unb64(kv["key"]),
                               unb64(kv["value"]) if kv.get("value") else ""))
                last = max(last, rev)
            if last >= head:
                break
    finally:
        kill_quietly(p)
    assert last >= head, f"etcd's history stopped at revision {last} of {head}"
    return events, prefix


def holdings(events, prefix, instances):
    """For each host, its holdings as (worker, low, high): IDs of that worker
    whose time t has low < t <= high.  A claim writes workers/n and the mark in
    one transaction, guarded on the mark not having moved since it was read;
    renewals are guarded on the claim's lease, so every mark written between
    two claims belongs to the first of them."""
    host_of = {inst: i for i, inst in enumerate(instances)}
    mark = {}
    open_ = {}
    out = {i: [] for i in range(len(instances))}
    for rev, typ, key, value in events:
        rest = key[len(prefix):]
        if rest.startswith("workers/") and typ == "PUT":
            n = int(rest.split("/")[1])
            owner = json.loads(value)["instance"]
            if n in open_:
                out[open_[n][0]].append(tuple(open_[n][1:]))
            open_[n] = [host_of.get(owner, -1), n, mark.get(n, 0), mark.get(n, 0)]
        elif rest.startswith("hwm/") and typ == "PUT":
            n = int(rest.split("/")[1])
            mark[n] = int(value)
            if n in open_:
                open_[n][3] = mark[n]
    for n, (host, w, lo, hi) in open_.items():
        out.setdefault(host, []).append((w, lo, hi))
    return out


def check_ids(hosts, held, fresh_switches):
    """Reads every ID file; returns (total, duplicates, out_of_order, outside)."""
    all_ids = []
    out_of_order = outside = total = 0
    for host in hosts:
        iv = sorted(held.get(host.i, []))
        starts = np.array([(w << 41) | (lo + 1) for w, lo, hi in iv], dtype=np.uint64)
        ends = np.array([(w << 41) | hi for w, lo, hi in iv], dtype=np.uint64)
        for label, path in host.id_files():
            a = np.fromfile(path, dtype=np.uint64)
            total += len(a)
            if len(a) == 0:
                continue
            # within one thread: increasing, except where the daemon moved to
            # a fresh number because its clock went back (ID time goes back too)
            worker = (a >> np.uint64(12)) & np.uint64(WORKER_MASK)
            down = np.nonzero(a[1:] <= a[:-1])[0]
            bad = [k for k in down if worker[k] == worker[k + 1] or a[k + 1] == a[k]]
            if bad or len(down) > fresh_switches[host.i]:
                k = (bad or list(down))[0]
                log(f"{label}: ID {int(a[k + 1])} follows {int(a[k])} (at {k + 1}; {len(down)} "
                    f"decreases, {fresh_switches[host.i]} fresh-number switches)")
                out_of_order += max(len(bad), len(down) - fresh_switches[host.i])
            # each ID inside a holding of its host: key = worker << 41 | time
            key = (worker << np.uint64(41)) | (a >> np.uint64(TIME_SHIFT))
            idx = np.searchsorted(starts, key, side="right").astype(np.int64) - 1
            ok = idx >= 0
            ok[ok] = key[ok] <= ends[idx[ok]]
            miss = np.count_nonzero(~ok)
            if miss:
                k = int(np.nonzero(~ok)[0][0])
                log(f"{label}: {miss} IDs outside every holding of {host.name}, first "
                    f"{int(a[k])} (worker {int(worker[k])}, time {int(key[k]) & ((1 << 41) - 1)})")
                outside += int(miss)
            all_ids.append(a)
    flat = np.concatenate(all_ids) if all_ids else np.zeros(0, dtype=np.uint64)
    flat.sort(kind="stable")
    dups = int(np.count_nonzero(flat[1:] == flat[:-1]))
    if dups:
        k = int(np.nonzero(flat[1:] == flat[:-1])[0][0])
        log(f"duplicate ID {int(flat[k])} ({dups} in all)")
    return total, dups, out_of_order, outside


def read_gaps(path):
    gaps, first, last = [], None, None
    with open(path) as f:
        for line in f:
            a, b = line.split()
            if a == "first":
                first = int(b)
            elif a == "last":
                last = int(b)
            elif a != "end":
                gaps.append((int(a), int(b)))
    return first, last, gaps


def stretches(clients, t0, t1):
    """The times in [t0, t1] during which every one of clients (each a list
    of gaps) was in a gap, no ID taken by any of them: [(start, end)]."""
    ev = []
    for gaps in clients:
        for a, b in gaps:
            a, b = max(a, t0), min(b, t1)
            if a < b:
                ev += [(a, 1), (b, -1)]
    ev.sort(key=lambda e: (e[0], e[1]))
    depth, since, out = 0, None, []
    for t, d in ev:
        depth += d
        if depth == len(clients) and d == 1:
            since = t
        elif since is not None and depth < len(clients):
            out.append((since, t))
            since = None
    return out


def longest_stretch(clients, t0, t1):
    """(length, start) of the longest of stretches()."""
    return max(((b - a, a) for a, b in stretches(clients, t0, t1)), default=(0, t0))


def recoveries(healed, began, per_host, t0, t1):
    """After each host fault ended: how long until that host took IDs again,
    when that came before the host's next fault.  Returns ([(ms, kind, host,
    heal time)], how many were cut short by a next fault)."""
    out, cut = [], 0
    for i, kind, at in healed:
        name = f"h{i}"
        nxt = min((b for j, b in began if j == i and b > at), default=t1)
        back = 0
        for a, b in stretches(per_host[name], t0, t1):
            if a <= at < b:
                back = b - at if b <= nxt else None
        if back is None:
            cut += 1
        else:
            out.append((back, kind, name, at))
    return out, cut


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=120, help="seconds of faults")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--rate", type=int, default=10000, help="IDs/s per library client thread")
    ap.add_argument("--mean-interval", type=float, default=3.0,
                    help="mean seconds between faults")
    ap.add_argument("--faults", default=",".join(Chaos.KINDS),
                    help="the kinds of fault to draw from, comma-separated")
    ap.add_argument("--build", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the files of a passing run")
    a = ap.parse_args()
    kinds = [k for k in a.faults.split(",") if k]
    unknown = set(kinds) - set(Chaos.KINDS)
    if unknown:
        ap.error(f"unknown faults {', '.join(sorted(unknown))}; known: {', '.join(Chaos.KINDS)}")
    if a.build:
        harness.BUILD = os.path.abspath(a.build)
        harness.SNOWIDD = os.path.join(harness.BUILD, "daemon", "snowidd")
        harness.TAKER = os.path.join(harness.BUILD, "tests", "snowid-taker")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
    log(f"chaos: seed {seed}, {a.duration:.0f} s, {a.hosts} hosts")
    if os.geteuid() != 0:
        print("chaos: needs root for network namespaces: skipping")
        return 77
    libs = [p for p in ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1")
            if os.path.exists(p)]
    assert libs, "libfaketime is not installed"

    def on_signal(sig, _):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    rng = random.Random(seed)
    h = Harness("chaos")
    net = Net(a.hosts)
    ok = False
    try:
        Net.remove_stale()
        h.cleanup(net.down)  # runs last
        net.up()
        etcd = Etcd(h, 3, addrs=[f"{SUBNET}.{m + 1}" for m in range(3)], wrap=net.wrap(net.core))
        hosts = [Host(h, net, etcd, i, libs[0]) for i in range(a.hosts)]
        for host in hosts:
            host.daemon.start()
        for host in hosts:
            host.start_clients(a.rate)
        log(f"{a.hosts} hosts taking IDs; faults begin")
        chaos = Chaos(h, net, etcd, hosts, rng, kinds)
        chaos.run(a.duration, a.mean_interval)
        healed = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000
        log("all faults healed; waiting for every host to take IDs again")
        etcd.wait_healthy(60)

        sizes = {p: os.path.getsize(p) for host in hosts for _, p in host.id_files()}
        wait_for(lambda: all(os.path.getsize(p) > n for p, n in sizes.items()), 60, "every client to take IDs after the last fault", 0.1)
        results = {}
        for host in hosts:
            results[host.name] = host.stop_clients()
        for host in hosts:
            host.daemon.stop(timeout=20)

        events, prefix = etcd_history(etcd, net)
        held = holdings(events, prefix, [host.instance for host in hosts])
        fresh = {host.i: host.daemon.log_text().count("fresh worker number") for host in hosts}
        log(f"etcd history: {len(events)} events, {sum(len(v) for v in held.values())} holdings")
        total, dups, disorder, outside = check_ids(hosts, held, fresh)

        errors = {}
        for name, (lib, web) in results.items():
            for k, v in lib.get("errors", {}).items():
                errors[f"lib {k}"] = errors.get(f"lib {k}", 0) + v
            for k, v in web.get("errors", {}).items():
                errors[f"http {k}"] = errors.get(f"http {k}", 0) + v
        # stretches with no ID: from when every client had its first ID to the end
        per_host, clients = {}, []
        t0, t1 = 0, healed
        for host in hosts:
            mine = []
            for _, path in host.id_files():
                first, last, gaps = read_gaps(path + ".gaps")
                t0 = max(t0, first)
                assert last >= healed, f"{host.name}: no ID after the faults were healed"
                mine.append(gaps)
            per_host[host.name] = mine
            clients += mine
        start_ms = chaos.start_ns // 1000000
        any_host = longest_stretch(clients, t0, t1)
        worst = max(longest_stretch(c, t0, t1) + (n,) for n, c in per_host.items())
        back, cut = recoveries(chaos.healed, chaos.began, per_host, t0, t1)
        slow = max(back, default=(0, "none", "", t0))
        stopped = sorted(b[0] for b in back if b[0] > 0)  # faults that stopped IDs
        median = stopped[len(stopped) // 2] if stopped else 0
        faults = ", ".join(f"{k} {v}" for k, v in chaos.counts.items())
        errs = ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"
        ok = dups == 0 and disorder == 0 and outside == 0
        print(f"chaos: seed {seed}, {a.duration:.0f} s, {a.hosts} hosts: {total:,} IDs checked, "
              f"{dups} duplicates, {disorder} out of order, {outside} outside their host's "
              f"holdings; faults: {faults} ({sum(chaos.counts.values())} in all); client errors: "
              f"{errs}; longest stretch with no ID on any host: {any_host[0]} ms at "
              f"+{(any_host[1] - start_ms) / 1000:.1f} s (one host alone: {worst[0]} ms, "
              f"{worst[2]} at +{(worst[1] - start_ms) / 1000:.1f} s); slowest return of IDs "
              f"after a fault ended: {slow[0]} ms ({slow[1]} on {slow[2]} at "
              f"+{(slow[3] - start_ms) / 1000:.1f} s; median {median} ms over the {len(stopped)} "
              f"that had stopped IDs; "
              f"{cut} cut short by the next fault)",
              flush=True)
    except KeyboardInterrupt as e:
        log(f"chaos: interrupted ({e})")
    except Exception:
        import traceback
        traceback.print_exc()
    finally:
        if not ok or a.keep:
            h.failed = True
        if not ok:
            log(f"chaos: FAILED; replay with --seed {seed}")
        h.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
