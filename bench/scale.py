#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The scale test behind bench/scale.sh: a 3-member etcd cluster on loopback
and N real snowidd processes, one per simulated host.

It measures, in this order: the claim storm (all N started together), the
cluster at rest (etcd requests and revisions per host, the database's size
and growth, each daemon's memory and CPU), a wave (10% killed with -9 at once
and restarted) and the worker space full (one daemon too many, then one
holder killed). It writes a Markdown table and a plot of held numbers over
time to bench/results/.

Run it through bench/scale.sh, which makes the directories, raises the file
limit and cleans up whatever is left however this script ends.
"""
import argparse
import base64
import collections
import http.client
import json
import math
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


class Failure(Exception):
    pass


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def b64(s):
    return base64.b64encode(s.encode()).decode()


def prefix_end(p):
    return p[:-1] + chr(ord(p[-1]) + 1)


def free_ports(n):
    import socket
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def go_duration_s(text):
    """etcd's periodic retention: a Go duration (5m, 1h30m, 90s) or hours."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text) * 3600
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text):
        if m.start() != pos:
            raise ValueError(text)
        total += float(m.group(1)) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[m.group(2)]
        pos = m.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"not a duration: {text}")
    return total


def fmt_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def fmt_duration(s):
    if s == math.inf:
        return "never"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def pct(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


# ---- /proc ----

def cpu_seconds(pid):
    """CPU time of all the process's threads (schedstat: ns), or None if gone."""
    try:
        total = 0
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, IndexError, ValueError):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
        except (OSError, IndexError, ValueError):
            return None


def memory_kib(pid):
    """(VmRSS, USS = Private_Clean + Private_Dirty, Pss, Threads), KiB; None if gone."""
    try:
        out = {}
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "Threads"):
                    out[k] = int(v.split()[0])
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Private_Clean", "Private_Dirty", "Pss"):
                    out[k] = int(v.split()[0])
        return (out["VmRSS"], out["Private_Clean"] + out["Private_Dirty"], out["Pss"],
                out["Threads"])
    except (OSError, KeyError, ValueError):
        return None


def machine_cpu():
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def busy_share(a, b):
    return (b[0] - a[0]) / max(1, b[1] - a[1])


def flag_value(args, name, default):
    """The number given to a snowidd flag in args (--name V or --name=V), or default."""
    v = default
    for i, x in enumerate(args):
        if x == name and i + 1 < len(args):
            v = float(args[i + 1])
        elif x.startswith(name + "="):
            v = float(x.split("=", 1)[1])
    return v


def warning_times(text, what):
    """Seconds (of the day, monotonic across midnight) of the log lines with `what`."""
    out = []
    for line in text.splitlines():
        m = re.match(r"(\d\d):(\d\d):(\d\d\.\d+) snowidd: ", line)
        if m and what in line:
            t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
            while out and t < out[-1] - 43200:
                t += 86400
            out.append(t)
    return out


# ---- etcd ----

class Etcd:
    """Three members on loopback, started with the settings a snowid cluster
    should use; requests to them over kept-alive HTTP connections."""

    def __init__(self, args, pidfile):
        self.n = 3
        ports = free_ports(2 * self.n)
        self.client, self.peer = ports[:self.n], ports[self.n:]
        self.urls = [f"http://127.0.0.1:{p}" for p in self.client]
        peers = [f"http://127.0.0.1:{p}" for p in self.peer]
        cluster = ",".join(f"m{i}={peers[i]}" for i in range(self.n))
        self.procs = []
        self.conns = {}
        for i in range(self.n):
            cmd = ["etcd", "--name", f"m{i}", "--data-dir", os.path.join(args.work, f"etcd-m{i}"),
                   "--listen-client-urls", self.urls[i], "--advertise-client-urls", self.urls[i],
                   "--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
                   "--initial-cluster", cluster, "--initial-cluster-state", "new",
                   "--initial-cluster-token", f"scale-{os.getpid()}",
                   "--auto-compaction-mode", args.compaction_mode,
                   "--auto-compaction-retention", args.compaction_retention,
                   "--quota-backend-bytes", str(args.quota_bytes),
                   "--logger", "zap", "--log-level", "warn"]
            with open(os.path.join(args.work, f"etcd-m{i}.log"), "ab") as lf:
                p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                     start_new_session=True)
            self.procs.append(p)
            pidfile.write(f"{p.pid}\n")
            pidfile.flush()
        deadline = time.monotonic() + 60
        while not all(self.healthy(i) for i in range(self.n)):
            for p in self.procs:
                if p.poll() is not None:
                    raise Failure(f"etcd exited with {p.returncode} (see etcd-m*.log)")
            if time.monotonic() > deadline:
                raise Failure("etcd did not become healthy in 60 s")
            time.sleep(0.1)

    def _request(self, i, method, path, body=None, timeout=10):
        for attempt in (0, 1):
            c = self.conns.get(i)
            if c is None:
                c = self.conns[i] = http.client.HTTPConnection("127.0.0.1", self.client[i],
                                                               timeout=timeout)
            try:
                c.request(method, path, body=body,
                          headers={"Content-Type": "application/json"} if body else {})
                r = c.getresponse()
                data = r.read()
                if r.status != 200:
                    raise OSError(f"{self.urls[i]}{path}: HTTP {r.status}: {data[:200]!r}")
                return data
            except (OSError, http.client.HTTPException):
                c.close()
                self.conns.pop(i, None)
                if attempt:
                    raise

    def healthy(self, i):
        try:
            return json.loads(self._request(i, "GET", "/health", timeout=1)).get("health") == "true"
        except Exception:
            return False

    def call(self, path, body, member=0):
        last = None
        for k in range(self.n):
            i = (member + k) % self.n
            try:
                return json.loads(self._request(i, "POST", path, json.dumps(body).encode()) or b"{}")
            except Exception as e:
                last = e
        raise Failure(f"no etcd member answered {path}: {last}")

    def revision(self):
        return int(self.call("/v3/kv/range", {"key": b64("/"), "count_only": True})
                   ["header"]["revision"])

    def held(self, prefix):
        """[(number, pid)] of the workers/ keys, read serializably from the
        last member (the daemons send everything to the first one)."""
        p = prefix + "workers/"
        r = self.call("/v3/kv/range", {"key": b64(p), "range_end": b64(prefix_end(p)),
                                       "serializable": True}, member=self.n - 1)
        out = []
        for kv in r.get("kvs", []):
            key = base64.b64decode(kv["key"]).decode()
            try:
                pid = json.loads(base64.b64decode(kv.get("value", "")))["pid"]
            except (ValueError, KeyError, TypeError):
                pid = None
            out.append((int(key.rsplit("/", 1)[1]), pid))
        return out

    def metrics(self, i):
        """[(name, {label: value}, float)] of one member's /metrics."""
        out = []
        text = self._request(i, "GET", "/metrics").decode()
        for line in text.splitlines():
            if not line or line[0] == "#":
                continue
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)", line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            try:
                out.append((m.group(1), labels, float(m.group(3))))
            except ValueError:
                pass
        return out

    def snapshot(self):
        """What is measured from each member's /metrics, at one moment."""
        snap = []
        for i in range(self.n):
            ms = self.metrics(i)
            d = {"requests": collections.Counter(), "gauges": {}}
            for name, lab, v in ms:
                if name == "grpc_server_handled_total" and lab.get("grpc_type") == "unary":
                    d["requests"][lab["grpc_method"]] += v
                elif (name == "grpc_server_msg_received_total"
                      and lab.get("grpc_method") == "LeaseKeepAlive"):
                    d["requests"]["LeaseKeepAlive (messages)"] += v
                elif not lab:
                    d["gauges"][name] = v
            snap.append(d)
        return snap

    def leader(self):
        for i in range(self.n):
            try:
                st = self.call("/v3/maintenance/status", {}, member=i)
                if st.get("leader") == st["header"]["member_id"]:
                    return i
            except Exception:
                pass
        return None

    def cpu(self):
        return [cpu_seconds(p.pid) or 0.0 for p in self.procs]

    def stop(self):
        for c in self.conns.values():
            c.close()
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        end = time.monotonic() + 5
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


OWN = ("Range", "Status")  # this script's reads; snowidd sends neither


def daemons_only(counter):
    return collections.Counter({k: v for k, v in counter.items() if k not in OWN and v})


def requests_between(a, b):
    """Per member Counter of requests (unary calls + keepalive messages)."""
    return [b[i]["requests"] - a[i]["requests"] for i in range(len(a))]


# ---- daemons ----

class Daemon:
    def __init__(self, ctx, index):
        self.ctx = ctx
        self.index = index
        self.instance = f"s{index}"  # s<n>, or s<name>
        self.proc = None
        self.gen = 0
        self.logs = []

    def start(self):
        a = self.ctx
        self.gen += 1
        logpath = os.path.join(a.work, "logs", f"{self.instance}.{self.gen}.log")
        self.logs.append(logpath)
        cmd = [a.snowidd, "--config", "/dev/null", "--etcd", ",".join(a.etcd.urls),
               "--cluster", a.cluster, "--instance", self.instance, "--runtime-dir", a.rundir,
               "--log-level", "warning", "--time-bits", str(a.time_bits),
               "--worker-bits", str(a.worker_bits), "--seq-bits", str(a.seq_bits)] + a.daemon_args
        self.started = time.monotonic()
        with open(logpath, "ab") as lf:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                         env=a.env, start_new_session=True)
        a.pidfile.write(f"{self.proc.pid}\n")
        return self

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        self.proc.kill()

    def log_text(self):
        out = []
        for p in self.logs:
            with open(p, errors="replace") as f:
                out.append(f.read())
        return "".join(out)


class Ctx:
    pass


def watch_held(ctx, daemons, t0, timeout, timeline, label, done=None):
    """Polls workers/ until every daemon in `daemons` holds exactly one
    number (or done(held) is true); returns (time since t0, {pid: first seen})."""
    first = {}
    want = {d.pid: d for d in daemons}
    deadline = t0 + timeout
    while True:
        t_sent = time.monotonic()
        held = ctx.etcd.held(ctx.prefix)
        t = time.monotonic()
        per_pid = collections.Counter(pid for _, pid in held)
        live_held = sum(1 for pid in per_pid if pid in want)
        timeline.append((t - t0, live_held, len(held)))
        for pid in per_pid:
            if pid in want and pid not in first:
                first[pid] = t
        dead = [d for d in daemons if not d.alive()]
        if dead:
            raise Failure(f"{label}: {len(dead)} daemon(s) exited, e.g. {dead[0].instance} with "
                          f"{dead[0].proc.returncode}:\n{dead[0].log_text()[-2000:]}")
        doubles = [pid for pid, c in per_pid.items() if c > 1]
        if doubles:
            ctx.notes.append(f"{label}: pid {doubles[0]} held {per_pid[doubles[0]]} numbers at "
                             f"+{t - t0:.2f} s")
        finished = done(held) if done else (live_held == len(want) and not doubles)
        if finished:
            return t - t0, first
        if t > deadline:
            raise Failure(f"{label}: {live_held} of {len(want)} hold a number after {timeout} s")
        time.sleep(max(0.0, ctx.poll - (time.monotonic() - t_sent)))


def summarize_logs(paths, top=8):
    """Counts of daemon log lines by message, numbers replaced by #."""
    kinds = collections.Counter()
    total = 0
    for p in paths:
        try:
            with open(p, errors="replace") as f:
                for line in f:
                    total += 1
                    msg = re.sub(r"^\d\d:\d\d:\d\d\.\d+ snowidd: ", "", line.strip())
                    msg = re.sub(r"\b[0-9a-f]{12,}\b", "X", msg)
                    kinds[re.sub(r"\d+", "#", msg)[:160]] += 1
        except OSError:
            pass
    return total, kinds.most_common(top)


def summarize_etcd_logs(work, top=8):
    kinds = collections.Counter()
    total = 0
    for i in range(3):
        try:
            with open(os.path.join(work, f"etcd-m{i}.log"), errors="replace") as f:
                for line in f:
                    total += 1
                    try:
                        j = json.loads(line)
                        kinds[f"{j.get('level')}: {j.get('msg')}"] += 1
                    except ValueError:
                        kinds[re.sub(r"\d+", "#", line.strip())[:120]] += 1
        except OSError:
            pass
    return total, kinds.most_common(top)


# ---- the plot ----

def nice_ticks(top):
    """0, step, 2 step... up to top, with step 1, 2 or 5 times a power of ten."""
    raw = top / 5
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [round(i * step, 10) for i in range(int(top / step) + 1)]


def plot(path_base, n, storm, wave, wave_k, full):
    """A PNG through matplotlib if it is installed, else a hand-made SVG."""
    want = os.environ.get("SCALE_PLOT", "auto")
    # the states just before: nothing held at the start; all held before the kill
    storm = [(0.0, 0, 0)] + storm if storm else storm
    wave = [(0.0, n, n)] + wave if wave else wave
    if want != "svg":
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            if want == "png":
                raise
            plt = None
        if plt:
            fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
            for ax, (title, tl, extra) in zip(axes, (
                    (f"claim storm: {n} daemons started together", storm, False),
                    (f"wave: {wave_k} killed with -9 at 0 s and restarted", wave, True))):
                if tl:
                    ax.step([p[0] for p in tl], [p[1] for p in tl], where="post",
                            label="held by running daemons", color="#4477aa")
                    if extra:
                        ax.step([p[0] for p in tl], [p[2] for p in tl], where="post",
                                label="workers/ keys (with the killed ones' until their lease "
                                      "expires)", color="#aa7744", linestyle="--")
                ax.axhline(n, color="grey", linewidth=0.6)
                ax.set_title(title, fontsize=10)
                ax.set_xlabel("seconds")
                ax.set_ylabel("worker numbers held")
                ax.set_ylim(0, max([n] + [p[2] for p in tl]) * 1.05 + 1)
                ax.grid(alpha=0.3)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=8, loc="lower right")
            if full is not None:
                fig.text(0.99, 0.01, full, fontsize=8, ha="right")
            fig.tight_layout(rect=(0, 0.03, 1, 1))
            fig.savefig(path_base + ".png", dpi=110)
            return path_base + ".png"
    # hand-made SVG: two panels of step lines
    w, h, pad = 1100, 420, 60
    pw = (w - 3 * pad) / 2
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>']
    for k, (title, tl, extra) in enumerate((
            (f"claim storm: {n} daemons started together", storm, False),
            (f"wave: {wave_k} killed with -9 at 0 s and restarted", wave, True))):
        x0, y0, ph = pad + k * (pw + pad), 40, h - 100
        xmax = max([p[0] for p in tl] + [1.0]) * 1.03
        ymax = max([n] + [p[2] for p in tl]) * 1.05 + 1

        def X(t, x0=x0, xmax=xmax):
            return x0 + pw * t / xmax

        def Y(v, y0=y0, ymax=ymax):
            return y0 + ph - ph * v / ymax
        out.append(f'<text x="{x0 + pw / 2}" y="25" text-anchor="middle">{title}</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" '
                   f'stroke="black"/>')
        for t in nice_ticks(xmax):
            out.append(f'<text x="{X(t):.1f}" y="{y0 + ph + 16}" text-anchor="middle">{t:g}'
                       '</text>')
        for v in nice_ticks(ymax):
            out.append(f'<text x="{x0 - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
            out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" '
                       'stroke="#ddd" stroke-width="0.5"/>')
        out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{Y(n):.1f}" y2="{Y(n):.1f}" '
                   f'stroke="grey" stroke-width="0.6"/>')
        out.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 34}" text-anchor="middle">seconds'
                   '</text>')
        for col, idx, dash in (("#4477aa", 1, ""), ("#aa7744", 2, ' stroke-dasharray="5,3"')):
            if idx == 2 and not extra:
                continue
            pts, prev = [], None
            for p in tl:
                if prev is not None:
                    pts.append(f"{X(p[0]):.1f},{Y(prev):.1f}")
                pts.append(f"{X(p[0]):.1f},{Y(p[idx]):.1f}")
                prev = p[idx]
            out.append(f'<polyline fill="none" stroke="{col}" stroke-width="1.5"{dash} '
                       f'points="{" ".join(pts)}"/>')
        legend = ["held by running daemons"] + (["workers/ keys (killed ones' too, until their "
                                                 "lease expires)"] if extra else [])
        for j, text in enumerate(legend):
            out.append(f'<text x="{x0 + 8}" y="{y0 + ph - 10 - 16 * j}" '
                       f'fill="{("#4477aa", "#aa7744")[j]}">{text}</text>')
    out.append("</svg>")
    with open(path_base + ".svg", "w") as f:
        f.write("\n".join(out) + "\n")
    return path_base + ".svg"


# ---- the run ----

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemons", type=int, default=1024, help="N, the number of snowidd (1024)")
    ap.add_argument("--rest", type=float, default=120, help="seconds measured at rest (120)")
    ap.add_argument("--settle", type=float, default=15,
                    help="seconds between the storm and the rest measurement (15)")
    ap.add_argument("--wave", type=float, default=0.10,
                    help="share of daemons killed with -9 at once and restarted (0.10)")
    ap.add_argument("--full-wait", type=float, default=30,
                    help="seconds the extra daemon waits on a full space before a holder is "
                         "killed (30)")
    ap.add_argument("--fresh-cluster", action="store_true",
                    help="storm on a cluster no daemon has made yet (every daemon then also "
                         "races to create the layout and the marks); default: one daemon makes "
                         "it first and stops, as for a fleet that reboots")
    ap.add_argument("--worker-bits", type=int, default=None,
                    help="default: the smallest with 2^bits >= N, so that the space is full")
    ap.add_argument("--seq-bits", type=int, default=12)
    ap.add_argument("--compaction-mode", default=os.environ.get("COMPACTION_MODE", "periodic"),
                    choices=("periodic", "revision"))
    ap.add_argument("--compaction-retention",
                    default=os.environ.get("COMPACTION_RETENTION", None),
                    help="periodic: a duration (5m); revision: a count (default 5m / 100000)")
    ap.add_argument("--quota-bytes", type=int,
                    default=int(os.environ.get("QUOTA_BYTES", 2 * 1024 ** 3)))
    ap.add_argument("--poll", type=float, default=None,
                    help="seconds between reads of workers/ (0.1, 0.25 past 256 daemons)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds the storm and the wave may take (600)")
    ap.add_argument("--snowidd", default=os.path.join(ROOT, "build", "daemon", "snowidd"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--work", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--rundir", required=True, help=argparse.SUPPRESS)
    ap.add_argument("daemon_args", nargs="*", help="after --: more snowidd flags for every daemon")
    a = ap.parse_args()

    n = a.daemons
    if n < 2:
        ap.error("--daemons must be at least 2")
    if a.worker_bits is None:
        a.worker_bits = max(1, math.ceil(math.log2(n)))
    a.time_bits = 63 - a.worker_bits - a.seq_bits
    if a.time_bits < 32 or (1 << a.worker_bits) < n:
        ap.error(f"layout {a.time_bits}/{a.worker_bits}/{a.seq_bits} does not hold {n} daemons "
                 "(time bits >= 32, 2^worker bits >= N)")
    if a.compaction_retention is None:
        a.compaction_retention = "5m" if a.compaction_mode == "periodic" else "100000"
    if a.poll is None:
        a.poll = 0.1 if n <= 256 else 0.25
    space = 1 << a.worker_bits
    sock = os.path.join(a.rundir, f"s{n}.sock")
    if len(sock.encode()) >= 108:
        ap.error(f"the socket path {sock} does not fit 108 bytes")
    for t in ("etcd", a.snowidd):
        if not (os.path.isfile(t) and os.access(t, os.X_OK)) and not any(
                os.access(os.path.join(d, t), os.X_OK) for d in os.environ["PATH"].split(":")):
            raise SystemExit(f"scale: {t} not found")

    # SIGTERM/SIGHUP/SIGINT: through the finally below, like any other end
    def on_signal(sig, frame):
        log(f"signal {sig}: stopping the daemons and etcd")
        raise SystemExit(128 + sig)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)

    ctx = Ctx()
    ctx.__dict__.update(vars(a))
    ctx.cluster = f"scale-{os.getpid()}"
    ctx.prefix = f"/snowid/{ctx.cluster}/"
    ctx.notes = []
    ctx.env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID",
                            "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES")}
    os.makedirs(os.path.join(a.work, "logs"), exist_ok=True)
    ctx.pidfile = open(os.path.join(a.work, "pids"), "a", buffering=1)
    daemons = []
    extra = []
    res = {}
    rows = []
    storm_tl, wave_tl, k, full_note = [], [], 0, None

    def report():
        """Section 7: the plot, the logs, the table (also after a failure: what there is)."""
        os.makedirs(a.out, exist_ok=True)
        plot_path = plot(os.path.join(a.out, f"scale-{n}"), n, storm_tl, wave_tl, k, full_note)
        rows.append(("7 plot", "held numbers over time (storm, wave)",
                     os.path.relpath(plot_path, ROOT)))
        dl_total, dl_kinds = summarize_logs([p for d in daemons + extra for p in d.logs])
        el_total, el_kinds = summarize_etcd_logs(a.work)

        # extrapolation to 1,024 hosts
        ext = []
        if n < 1024 and "rest" in res:
            r = res["rest"]
            ext = [
                f"- daemons' memory: 1,024 x {r['pss'] / 1024:.2f} MiB PSS = "
                f"{1024 * r['pss'] / 1024 ** 2:.1f} GiB (USS {r['uss'] / 1024:.2f} MiB each)",
                f"- daemons' CPU at rest: 1,024 x {100 * r['cpu_d']:.2f}% = "
                f"{1024 * r['cpu_d']:.2f} cores",
                f"- etcd at rest: {1024 * r['rps_host']:,.0f} requests/s and "
                f"{1024 * r['rev_host']:,.0f} revisions/s; at {1e3 * r['cpu_req']:.3f} ms of "
                f"etcd CPU per request, {r['idle'] + 1024 * r['rps_host'] * r['cpu_req']:.2f} "
                "cores with idle (if it stays linear)",
                f"- the storm: {r['grants']:.0f} claim attempts for {n} daemons, "
                f"{1e3 * r['storm_busy'] / max(r['grants'], 1):.1f} ms of etcd CPU each (above "
                f"idle) with a space of {space} numbers; every attempt's scan returns all "
                "workers/ and hwm/ keys, so an attempt costs more with a larger space (run "
                "with --worker-bits 10 to measure it at 1,024 numbers)",
            ]
        argv = sys.argv[1:]
        for opt in ("--work", "--rundir"):
            if opt in argv:
                i = argv.index(opt)
                del argv[i:i + 2]
        md = [f"# Scale test: {n} snowidd, 3-member etcd on loopback", "",
              f"`bench/scale.sh {' '.join(argv)}`; {time.strftime('%Y-%m-%d')}; "
              f"{os.cpu_count()} cores, {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 1024 ** 3:.0f}"
              f" GiB, {platform.release()}; {subprocess.run(['etcd', '--version'], capture_output=True, text=True).stdout.split(chr(10))[0]}; "
              f"layout {a.time_bits}/{a.worker_bits}/{a.seq_bits} ({space} numbers); etcd "
              f"--auto-compaction-mode={a.compaction_mode} "
              f"--auto-compaction-retention={a.compaction_retention} "
              f"--quota-backend-bytes={a.quota_bytes}; snowidd's defaults (lease 10 s, renewal "
              "1 s, window 10 s, mark-step 5 s)"
              + (f" and {' '.join(a.daemon_args)}" if a.daemon_args else "")
              + "; every daemon given all 3 members in the same order.", "",
              "| part | what | value |", "| --- | --- | --- |"]
        md += [f"| {p} | {w} | {v} |" for p, w, v in rows]
        if ext:
            md += ["", f"Linear extrapolation to 1,024 hosts from this run of {n}:", ""] + ext
        md += ["", f"snowidd logs (level warning): {dl_total} lines from "
                   f"{len(daemons) + len(extra)} daemons ({sum(len(d.logs) for d in daemons + extra)}"
                   " processes)" + (":" if dl_kinds else ".")]
        md += [f"- {c} x `{m}`" for m, c in dl_kinds]
        md += ["", f"etcd logs (level warn, 3 members): {el_total} lines"
                   + (":" if el_kinds else ".")]
        md += [f"- {c} x `{m}`" for m, c in el_kinds]
        if ctx.notes:
            md += ["", "Noticed:"] + [f"- {x}" for x in ctx.notes]
        text = "\n".join(md) + "\n"
        path = os.path.join(a.out, f"scale-{n}.md")
        with open(path, "w") as f:
            f.write(text)
        print()
        print(text)
        log(f"wrote {os.path.relpath(path, ROOT)} and {os.path.relpath(plot_path, ROOT)}")

    try:
        ulimit = subprocess.run(["sh", "-c", "ulimit -n"], capture_output=True, text=True).stdout
        log(f"{n} daemons, layout {a.time_bits}/{a.worker_bits}/{a.seq_bits} ({space} numbers), "
            f"etcd compaction {a.compaction_mode} {a.compaction_retention}, quota "
            f"{fmt_bytes(a.quota_bytes)}, ulimit -n {ulimit.strip()}, work {a.work}")
        ctx.etcd = etcd = Etcd(a, ctx.pidfile)
        log(f"etcd: 3 members healthy at {', '.join(etcd.urls)}")
        if not a.fresh_cluster:
            # the cluster made by one daemon, which then stops (revoking its lease)
            first = Daemon(ctx, "init").start()
            watch_held(ctx, [first], first.started, 60, [], "making the cluster")
            first.proc.terminate()
            if first.proc.wait(timeout=15) != 0:
                raise Failure(f"the first daemon exited {first.proc.returncode} on SIGTERM")
            extra.append(first)
            log(f"the cluster {ctx.cluster} made by a first daemon, which stopped")
        log("etcd's idle CPU over 5 s")
        c0, ti = sum(etcd.cpu()), time.monotonic()
        time.sleep(5)
        idle = (sum(etcd.cpu()) - c0) / (time.monotonic() - ti)

        # ---- 1. the claim storm ----
        daemons = [Daemon(ctx, i) for i in range(n)]
        m0, rev0, cpu_e0 = etcd.snapshot(), etcd.revision(), sum(etcd.cpu())
        mc0 = machine_cpu()
        storm_tl = []
        t0 = time.monotonic()
        for d in daemons:
            d.start()
        spawn = time.monotonic() - t0
        log(f"storm: {n} daemons started in {spawn:.2f} s; waiting for all to hold a number")
        took, first = watch_held(ctx, daemons, t0, a.timeout, storm_tl, "storm")
        m1, rev1 = etcd.snapshot(), etcd.revision()
        storm_cpu_etcd = sum(etcd.cpu()) - cpu_e0
        storm_cpu_d = sum(cpu_seconds(d.pid) or 0 for d in daemons)
        storm_busy = storm_cpu_etcd - idle * (time.monotonic() - t0)
        storm_machine = busy_share(mc0, machine_cpu())
        per = [first[d.pid] - d.started for d in daemons]
        req = requests_between(m0, m1)
        tot = daemons_only(sum(req, collections.Counter()))
        grants = tot["LeaseGrant"]
        log(f"storm: all {n} hold distinct numbers {took:.2f} s after the start; slowest daemon "
            f"{max(per):.2f} s, median {statistics.median(per):.2f} s; {grants:.0f} leases granted")
        rows += [
            ("1 claim storm", f"{n} daemons started together on "
             + ("a fresh cluster (all race to make it)" if a.fresh_cluster else
                "a made cluster (as a fleet rebooting)") + " (spawning took)", f"{spawn:.2f} s"),
            ("", f"all {n} hold distinct worker numbers after", f"**{took:.2f} s**"),
            ("", "per daemon, its start to its number held: median / p90 / slowest",
             f"{statistics.median(per):.2f} / {pct(per, 0.9):.2f} / **{max(per):.2f} s**"),
            ("", "claim attempts (leases granted) / lost claims (conflicts, retried)",
             f"{grants:.0f} / {grants - n:.0f} ({(grants - n) / n:.2f} per daemon)"),
            ("", "etcd requests from the daemons during the storm / revisions",
             f"{sum(tot.values()):,.0f} ("
             + ", ".join(f"{m} {v / n:.2f}" for m, v in tot.most_common()) + " per daemon) / "
             f"{rev1 - rev0:,}"),
            ("", "CPU during the storm: etcd (3 members; above idle) / all daemons",
             f"{storm_cpu_etcd:.2f} s ({storm_busy:.2f} s, {1e3 * storm_busy / max(grants, 1):.1f} "
             f"ms per claim attempt) / {storm_cpu_d:.2f} s"),
            ("", "the machine's CPUs busy during the storm (everything on it)",
             f"{100 * storm_machine:.0f}% of {os.cpu_count()} cores"),
        ]

        # ---- 2-4. at rest ----
        log(f"settling for {a.settle:.0f} s, then {a.rest:.0f} s at rest")
        end = time.monotonic() + a.settle
        while time.monotonic() < end:
            time.sleep(0.5)
            if any(not d.alive() for d in daemons):
                raise Failure("a daemon exited while settling")
        held_before = {pid for _, pid in etcd.held(ctx.prefix)}
        rev_a = etcd.revision()
        ma = etcd.snapshot()
        ta = time.monotonic()
        cpu_da = {d.pid: cpu_seconds(d.pid) for d in daemons}
        cpu_ea = etcd.cpu()
        mca = machine_cpu()
        end = ta + a.rest
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            if any(not d.alive() for d in daemons):
                raise Failure("a daemon exited at rest")
        mb = etcd.snapshot()
        tb = time.monotonic()
        rev_b = etcd.revision()
        cpu_db = {d.pid: cpu_seconds(d.pid) for d in daemons}
        cpu_eb = etcd.cpu()
        rest_machine = busy_share(mca, machine_cpu())
        load1 = os.getloadavg()[0]
        mem = [memory_kib(d.pid) for d in daemons]
        emem = [memory_kib(p.pid) for p in etcd.procs]
        held_after = {pid for _, pid in etcd.held(ctx.prefix)}
        secs = tb - ta
        if held_after != held_before or len(held_after) != n:
            ctx.notes.append(f"at rest: the holders changed ({len(held_before)} before, "
                             f"{len(held_after)} after, {len(held_before ^ held_after)} differ)")
        req = [daemons_only(r) for r in requests_between(ma, mb)]
        tot = sum(req, collections.Counter())
        rps = sum(tot.values()) / secs
        rev_rate = (rev_b - rev_a) / secs
        cpu_d = [(cpu_db[p] - cpu_da[p]) / secs for p in cpu_da if cpu_da[p] is not None
                 and cpu_db[p] is not None]
        cpu_e = [(b - a_) / secs for a_, b in zip(cpu_ea, cpu_eb)]
        leader = etcd.leader()
        share = [sum(r.values()) / max(1, sum(tot.values())) for r in req]
        breakdown = ", ".join(f"{k} {v / secs / n:.2f}" for k, v in tot.most_common() if v)
        log(f"rest: {rps / n:.2f} etcd requests/s per host ({breakdown}); "
            f"{rev_rate / n:.2f} revisions/s per host")
        rows += [
            ("2 at rest", "measured over", f"{secs:.0f} s, {n} daemons, after {a.settle:.0f} s "
                                             "settling"),
            ("", "etcd requests per second per host (unary calls + keepalive messages, "
                 "3 members)", f"**{rps / n:.2f}** ({rps:,.0f}/s in all)"),
            ("", "of which, per host per second", breakdown),
            ("", "share of requests by member (daemons list m0,m1,m2; leader "
                 f"m{leader if leader is not None else '?'})",
             " / ".join(f"m{i} {100 * s:.0f}%" for i, s in enumerate(share))),
            ("", "revisions per second per host", f"**{rev_rate / n:.3f}** "
                                                  f"({rev_rate:,.1f}/s in all)"),
            ("", "CPU: etcd members (% of one core, m0/m1/m2) / per daemon median, max",
             " / ".join(f"{100 * c:.1f}" for c in cpu_e)
             + f" / {100 * statistics.median(cpu_d):.2f}%, {100 * max(cpu_d):.2f}%"),
            ("", "the machine's CPUs busy at rest (everything on it) / load average",
             f"{100 * rest_machine:.0f}% of {os.cpu_count()} cores / {load1:.1f}"),
            ("", "etcd CPU above its idle (3 members together; idle before the storm), per "
                 "request", f"{100 * (sum(cpu_e) - idle):.1f}% of a core above {100 * idle:.1f}% "
                            f"idle: {1e3 * (sum(cpu_e) - idle) / max(rps, 1e-9):.3f} ms"),
        ]

        # ---- 3. the database ----
        def g(snap, name):
            return [m["gauges"].get(name, float("nan")) for m in snap]
        tot_a, tot_b = g(ma, "etcd_mvcc_db_total_size_in_bytes"), g(mb, "etcd_mvcc_db_total_size_in_bytes")
        use_a = g(ma, "etcd_mvcc_db_total_size_in_use_in_bytes")
        use_b = g(mb, "etcd_mvcc_db_total_size_in_use_in_bytes")
        comp_a = g(ma, "etcd_debugging_mvcc_compact_revision")
        comp_b = g(mb, "etcd_debugging_mvcc_compact_revision")
        put_a = g(ma, "etcd_debugging_mvcc_total_put_size_in_bytes")
        put_b = g(mb, "etcd_debugging_mvcc_total_put_size_in_bytes")
        L = leader if leader is not None else 0
        drev = rev_b - rev_a
        # a compaction to revision 1 (etcd's first periodic one) drops nothing
        compacted = comp_b[L] > max(comp_a[L], 1)
        bpr = (use_b[L] - use_a[L]) / drev if drev > 0 else float("nan")
        put_per_rev = (put_b[L] - put_a[L]) / drev if drev > 0 else float("nan")
        growth_day_host = (use_b[L] - use_a[L]) / secs * 86400 / n
        nocomp_day_host = rev_rate / n * bpr * 86400 if not compacted else float("nan")
        if a.compaction_mode == "periodic":
            r_s = go_duration_s(a.compaction_retention)
            interval = min(r_s, 3600)
            hist_s = r_s + interval
            comp_text = (f"periodic {a.compaction_retention}: every {fmt_duration(interval)} to "
                         f"the revision of {fmt_duration(r_s)} before (the first, "
                         f"{fmt_duration(r_s)} after etcd starts, to its first revision: history "
                         f"is first dropped {fmt_duration(r_s + interval)} after the start)")
            hist_per_host = hist_s * rev_rate / n * bpr
        else:
            r_rev = int(a.compaction_retention)
            comp_text = (f"revision {r_rev}: every 5 min, keeping the last {r_rev:,} revisions")
            hist_per_host = (r_rev / n + 300 * rev_rate / n) * bpr
        run_age = time.monotonic() - t0
        rows += [
            ("3 etcd database", f"size, leader m{L}: start / end of rest",
             f"{fmt_bytes(tot_a[L])} / {fmt_bytes(tot_b[L])}"),
            ("", "in use: start / end of rest",
             f"{fmt_bytes(use_a[L])} / {fmt_bytes(use_b[L])}"),
            ("", "compaction", comp_text + (
                f"; **one ran during the rest** (compact revision {comp_a[L]:.0f} -> "
                f"{comp_b[L]:.0f})" if compacted else
                f"; none ran during this run ({fmt_duration(run_age)} since the storm, compact "
                f"revision {comp_b[L]:.0f})")),
            ("", "growth of in-use bytes at rest, per host per day (extrapolated from the rest)",
             f"{fmt_bytes(growth_day_host)}" + (" (a compaction ran: includes it)" if compacted
                                                 else " (no compaction ran yet: this is the "
                                                      "growth without it)")),
            ("", "bytes per revision (in-use delta / revision delta; logical puts per revision)",
             f"{bpr:,.0f} B ({put_per_rev:,.0f} B put)" if not compacted else
             "n/a: a compaction ran during the rest"),
        ]
        if not compacted and drev > 0:
            quota_s = a.quota_bytes / max(1e-9, rev_rate / n * bpr * n)
            quota_1024 = a.quota_bytes / max(1e-9, rev_rate / n * bpr * 1024)
            rows += [
                ("", "without compaction: revisions x bytes per revision, per host per day",
                 f"{rev_rate / n * 86400:,.0f} rev x {bpr:,.0f} B = **{fmt_bytes(nocomp_day_host)}"
                 f"**; the {fmt_bytes(a.quota_bytes)} quota is full after "
                 f"{fmt_duration(quota_s)} with {n} hosts, {fmt_duration(quota_1024)} with 1,024"),
                ("", "with compaction: history kept at most, per host (then no growth)",
                 f"{fmt_bytes(hist_per_host)} ({fmt_bytes(hist_per_host * n)} for {n} hosts, "
                 f"{fmt_bytes(hist_per_host * 1024)} for 1,024), plus the live keys"),
            ]

        # ---- 4. memory ----
        mem = [m for m in mem if m]
        rss = [m[0] for m in mem]
        uss = [m[1] for m in mem]
        pss = [m[2] for m in mem]
        thr = [m[3] for m in mem]
        rows += [
            ("4 snowidd memory", "RSS (VmRSS): median / max",
             f"{statistics.median(rss) / 1024:.1f} / {max(rss) / 1024:.1f} MiB"),
            ("", "USS (Private_Clean + Private_Dirty): median / max",
             f"**{statistics.median(uss) / 1024:.2f} / {max(uss) / 1024:.2f} MiB**"),
            ("", f"PSS summed over all {n} (what they cost together) / threads each",
             f"{sum(pss) / 1024:.0f} MiB / {statistics.median(thr):.0f}"),
            ("", "etcd members RSS (m0/m1/m2)",
             " / ".join(f"{m[0] / 1024:.0f}" if m else "?" for m in emem) + " MiB"),
        ]
        res["rest"] = dict(rps_host=rps / n, rev_host=rev_rate / n, cpu_d=statistics.median(cpu_d),
                           cpu_e=sum(cpu_e), cpu_req=(sum(cpu_e) - idle) / max(rps, 1e-9), idle=idle,
                           uss=statistics.median(uss), pss=statistics.mean(pss),
                           rss=statistics.median(rss), emem=[m[0] if m else 0 for m in emem],
                           bpr=bpr, storm_took=took, storm_cpu_etcd=storm_cpu_etcd,
                           storm_cpu_d=storm_cpu_d, storm_busy=storm_busy, grants=grants)

        # ---- 5. the wave ----
        k = max(1, round(n * a.wave))
        victims = random.sample(daemons, k)
        m0 = etcd.snapshot()
        wave_tl = []
        t0w = time.monotonic()
        for d in victims:
            d.kill9()
        for d in victims:
            d.proc.wait()
        for d in victims:
            d.start()
        restarted = time.monotonic() - t0w
        log(f"wave: {k} daemons killed with -9 and restarted in {restarted:.2f} s")
        wtook, wfirst = watch_held(ctx, daemons, t0w, a.timeout, wave_tl, "wave")
        m1 = etcd.snapshot()
        wper = [wfirst[d.pid] - t0w for d in victims]
        wtot = daemons_only(sum(requests_between(m0, m1), collections.Counter()))
        full_msgs = sum(d.log_text().count("worker numbers are taken") for d in victims)
        log(f"wave: all {n} hold distinct numbers again {wtook:.2f} s after the kill")
        rows += [
            ("5 wave", f"{k} daemons ({100 * a.wave:.0f}%) killed with -9 at once, restarted "
                       "at once (took)", f"{restarted:.2f} s"),
            ("", f"all {n} hold distinct numbers again after", f"**{wtook:.2f} s** (lease TTL "
                                                               "10 s)"),
            ("", "restarted daemons: first / median / last to hold",
             f"{min(wper):.2f} / {statistics.median(wper):.2f} / {max(wper):.2f} s"),
            ("", "their 'worker numbers are taken' warnings / leases granted during the wave",
             f"{full_msgs} / {wtot['LeaseGrant']:.0f}"),
        ]

        # ---- 6. the worker space full ----
        full_note = None
        fill = space - n
        if fill > n:
            rows.append(("6 space full", "skipped", f"the space ({space}) is more than twice N: "
                                                    "run with --worker-bits so that 2^bits = N"))
        else:
            if fill:
                log(f"full: {fill} more daemons to fill the space of {space}")
                fillers = [Daemon(ctx, n + 1 + i).start() for i in range(fill)]
                extra += fillers
                watch_held(ctx, daemons + fillers, time.monotonic(), a.timeout, [], "filling")
            x = Daemon(ctx, n)
            x.start()
            extra.append(x)
            holders = [d for d in daemons + extra if d is not x and d.alive()]
            t0x = x.started
            while "worker numbers are taken" not in x.log_text():
                if not x.alive():
                    raise Failure(f"the extra daemon exited with {x.proc.returncode}:\n"
                                  f"{x.log_text()[-2000:]}")
                if time.monotonic() - t0x > 60:
                    raise Failure("the extra daemon said nothing about a full space in 60 s:\n"
                                  + x.log_text()[-2000:])
                time.sleep(0.1)
            said = time.monotonic() - t0x
            first_line = next(l for l in x.log_text().splitlines() if "are taken" in l)
            while time.monotonic() - t0x < a.full_wait:
                time.sleep(0.2)
            if any(pid == x.pid for _, pid in etcd.held(ctx.prefix)):
                raise Failure("the extra daemon holds a number in a full space")
            retries = x.log_text().count("worker numbers are taken")
            tw = warning_times(x.log_text(), "worker numbers are taken")
            last_gap = tw[-1] - tw[-2] if len(tw) > 1 else float("nan")
            bound = flag_value(a.daemon_args, "--lease-ttl", 10) + \
                flag_value(a.daemon_args, "--renew-interval", 1000) / 1000
            victim = random.choice(holders)
            t0k = time.monotonic()
            victim.kill9()
            victim.proc.wait()
            holders.remove(victim)
            full_tl = []
            ftook, _ = watch_held(ctx, holders + [x], t0k, a.timeout, full_tl, "full",
                                  done=lambda held: any(pid == x.pid for _, pid in held))
            retries_after = x.log_text().count("worker numbers are taken") - retries
            log(f"full: the extra daemon holds a number {ftook:.2f} s after a holder was killed")
            full_note = f"space full: the extra one held a number {ftook:.1f} s after a kill -9"
            rows += [
                ("6 space full", f"one daemon more than the {space} numbers "
                                 f"({'N' if not fill else f'N + {fill} fillers'} running)",
                 f"waited, and said after {said:.2f} s: `{first_line.split('snowidd: ', 1)[-1]}`"),
                ("", f"its warnings in the {a.full_wait:.0f} s before a holder was killed",
                 f"{retries}, the last two {last_gap:.1f} s apart (the retry backoff doubles from "
                 "0.1 s up to 30 s, jittered to 50-100%)"),
                ("", "kill -9 of one holder -> the extra one holds a number after",
                 f"**{ftook:.2f} s**: the freed lease expires within the TTL, then the extra "
                 f"one's next retry ({retries_after} warning(s) meanwhile); "
                 + (f"{ftook - bound:.1f} s past TTL + one renewal ({bound:g} s)" if ftook > bound
                    else f"within TTL + one renewal ({bound:g} s)")),
            ]

        report()
        return 0
    except Failure as e:
        log(f"FAILED: {e}")
        rows.append(("**FAILED**", "", str(e).split("\n")[0][:300]))
        try:
            report()
        except Exception as e2:  # what there is may not be enough for a report
            log(f"no report: {e2!r}")
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        live = [d for d in daemons + extra if d.alive()]
        for d in live:
            d.proc.terminate()
        end = time.monotonic() + 15
        for d in live:
            try:
                d.proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                d.proc.kill()
                d.proc.wait()
        bad = [d for d in live if d.proc.returncode not in (0, -signal.SIGKILL)]
        if bad:
            log(f"{len(bad)} daemons did not exit 0 on SIGTERM (e.g. {bad[0].instance}: "
                f"{bad[0].proc.returncode})")
        if getattr(ctx, "etcd", None):
            ctx.etcd.stop()
        ctx.pidfile.close()


if __name__ == "__main__":
    sys.exit(main())
