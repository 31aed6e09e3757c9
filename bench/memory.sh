#!/usr/bin/env bash
# snowidd's own memory with one holder, on a throwaway etcd: RSS, PSS and USS
# (Private_Clean + Private_Dirty, what stopping it would give back) from
# /proc/PID/smaps_rollup, and where the resident pages are: each shared
# library, the heap, thread stacks, other anonymous memory and the segment,
# summed from /proc/PID/smaps.  Measured once as configured by default and
# once with the HTTP gateway on (its thread pool).
# Usage: bench/memory.sh [BUILD]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/daemon/snowidd" ] || { echo "memory: build snowid first ($build/daemon/snowidd)" >&2; exit 1; }
work=$(mktemp -d)
inst=mem-$$
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work" "$work.run"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
until_ok() {
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$end" ] || { echo "memory: timed out waiting for: $*" >&2; exit 1; }
        sleep 0.1
    done
}
mkdir -m 0755 "$work.run"
export SNOWID_RUNTIME_DIR=$work.run
c=$(port) p=$(port)
etcd --name m --data-dir "$work/e" --log-level error \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "m=http://127.0.0.1:$p" >/dev/null 2>&1 &
until_ok 30 curl -fs "http://127.0.0.1:$c/health"

measure() {
    local what=$1
    shift
    "$build/daemon/snowidd" --config /dev/null --etcd "http://127.0.0.1:$c" --instance "$inst" \
        --runtime-dir "$work.run" "$@" 2>"$work/daemon.log" &
    local pid=$!
    until_ok 60 sh -c "'$build/cli/snowid' status --instance '$inst' | grep -q leased"
    # a few renewals, so that what runs at rest has run
    sleep 5
    python3 - "$pid" "$what" <<'EOF'
import sys
pid, what = sys.argv[1], sys.argv[2]
roll = {}
for line in open(f"/proc/{pid}/smaps_rollup"):
    k, _, v = line.partition(":")
    if v.strip().endswith("kB"):
        roll[k] = int(v.split()[0])
threads = int(next(l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("Threads:")))
groups = {}
name = None
for line in open(f"/proc/{pid}/smaps"):
    head = line.split()
    if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
        path = head[5] if len(head) > 5 else ""
        if path.startswith("/"):
            base = path.rsplit("/", 1)[1]
            name = "the snowidd binary" if base == "snowidd" else \
                ("the segment and its files" if "snowid" in path else base.split(".so")[0])
        elif path == "[heap]":
            name = "heap (malloc)"
        elif path in ("[stack]",) or path.startswith("[stack"):
            name = "main stack"
        elif path.startswith("[v"):
            name = "vdso, vvar"
        else:
            name = "anonymous (thread stacks, malloc arenas)"
    elif line.startswith("Rss:") and name:
        r = groups.setdefault(name, [0, 0, 0])
        r[0] += int(line.split()[1])
    elif line.startswith(("Private_Clean:", "Private_Dirty:")) and name:
        groups[name][1] += int(line.split()[1])
        if line.startswith("Private_Dirty:"):
            groups[name][2] += int(line.split()[1])
print(f"snowidd, {what}: RSS {roll['Rss'] / 1024:.1f} MiB, PSS {roll['Pss'] / 1024:.1f} MiB, "
      f"USS {(roll['Private_Clean'] + roll['Private_Dirty']) / 1024:.1f} MiB (of it written: "
      f"Private_Dirty {roll['Private_Dirty'] / 1024:.1f} MiB; the rest is pages of files, "
      f"shared with any other process that maps them), {threads} threads")
print("| what | RSS KiB | of it private KiB | of it written KiB |")
print("|---|---|---|---|")
for n, (rss, priv, dirty) in sorted(groups.items(), key=lambda x: -x[1][0]):
    if rss >= 64:
        print(f"| {n} | {rss} | {priv} | {dirty} |")
rest = [g for g in groups.values() if g[0] < 64]
print(f"| everything else (each under 64 KiB) | {sum(g[0] for g in rest)} | "
      f"{sum(g[1] for g in rest)} | {sum(g[2] for g in rest)} |")
print()
EOF
    kill "$pid"
    wait "$pid" || true
}

measure "default configuration"
measure "HTTP gateway on" --http "127.0.0.1:$(port)"
