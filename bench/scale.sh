#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scale test with real processes (not part of CI): a 3-member etcd cluster on
# loopback and N snowidd, one per simulated host, all on one machine.
# Measures the claim storm, etcd's cost and database growth at rest, the
# daemons' memory, a wave of kill -9 and restarts, and a full worker space;
# writes bench/results/scale-<N>.md and a plot beside it.
#
# Usage: bench/scale.sh [--daemons N] [--rest SEC] [--keep] [more: --help]
#   --daemons N               snowidd processes (default 1024)
#   --rest SEC                seconds measured at rest (default 120)
#   --settle SEC              pause between the storm and the rest (default 15)
#   --wave FRACTION           share killed with -9 and restarted (default 0.10)
#   --full-wait SEC           how long the extra daemon waits on a full space
#                             before a holder is killed (default 30)
#   --worker-bits W           default: the smallest with 2^W >= N (the space is
#                             full with N, or filled up for the full-space test)
#   --compaction-mode periodic|revision, --compaction-retention 5m|N
#                             (also COMPACTION_MODE, COMPACTION_RETENTION)
#   --quota-bytes B           etcd --quota-backend-bytes (default 2 GiB)
#   --keep                    keep the work directory (etcd data, every log)
#   -- FLAGS                  more snowidd flags, for every daemon
# SCALE_PLOT=svg forces the hand-made SVG instead of matplotlib's PNG.
# Needs etcd 3.4+ and python3 (python3-matplotlib for a PNG); root, or a hard
# limit on open files high enough for N daemons.
set -euo pipefail
cd "$(dirname "$0")/.."

keep=0 daemons=1024
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
    --keep) keep=1 ;;
    --daemons) daemons=${args[i + 1]:-1024} ;;
    --daemons=*) daemons=${args[i]#*=} ;;
    -h | --help) sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) break ;;
    esac
done
command -v etcd >/dev/null || { echo "scale: etcd is not installed (apt-get install etcd-server)"; exit 1; }
[ -x build/daemon/snowidd ] || { meson setup build >/dev/null; meson compile -C build >/dev/null; }

# each daemon holds a few descriptors, each etcd member one or two
# connections per daemon: raise the limit on open files (root may raise
# the hard limit too)
want=$((daemons * 8 + 4096))
[ "$want" -lt 65536 ] && want=65536
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$want" ]; then
    ulimit -Hn "$want" 2>/dev/null || true
    ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $((daemons * 4)) ] ||
    echo "scale: warning: ulimit -n is $(ulimit -n) for $daemons daemons"

work=$(mktemp -d /tmp/snowid-scale.XXXXXX)
# the daemons' sockets: a private directory (0755, owned by us: clients
# insist) whose socket paths fit 108 bytes
rundir=$(mktemp -d /tmp/sr-scale.XXXXXX)
chmod 0755 "$rundir"
py=

# shellcheck disable=SC2317 # (called by the trap)
cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    if [ -n "$py" ] && kill -0 "$py" 2>/dev/null; then
        kill -TERM "$py" 2>/dev/null || true
        # scale.py stops the daemons (SIGTERM, then -9) and etcd itself
        for _ in $(seq 300); do kill -0 "$py" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$py" 2>/dev/null || true
    fi
    # whatever is left (scale.py killed with -9...): only our own processes,
    # recognised by our directories on their command line
    if [ -f "$work/pids" ]; then
        while read -r pid; do
            if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
                grep -qF -e "$work" -e "$rundir"; then
                kill -KILL "$pid" 2>/dev/null || true
            fi
        done <"$work/pids"
    fi
    rm -rf "$rundir"
    if [ "$keep" = 1 ]; then echo "scale: kept $work"; else rm -rf "$work"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# a python3 that has matplotlib (for the PNG), if there is one
python=python3
python3 -c 'import matplotlib' 2>/dev/null ||
    { /usr/bin/python3 -c 'import matplotlib' 2>/dev/null && python=/usr/bin/python3; } || true
# in the background, so that a signal to this shell is handled at once
"$python" bench/scale.py --work "$work" --rundir "$rundir" "$@" &
py=$!
rc=0
wait "$py" || rc=$?
py=
exit "$rc"
