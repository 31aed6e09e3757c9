#!/usr/bin/env bash
# What one snowidd costs at rest: etcd requests per second (counted by etcd
# itself: gRPC calls handled, which the HTTP gateway turns requests into, and
# the keepalive stream's messages) and the daemon's resident memory.
# Usage: bench/coordination.sh [SECONDS]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
[ -x build/daemon/snowidd ] || { meson setup build >/dev/null; meson compile -C build >/dev/null; }
work=$(mktemp -d)
inst=coord-$$
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work" /run/snowid/$inst.*' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
c=$(port) p=$(port)
etcd --name b --data-dir "$work/e" --log-level error \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "b=http://127.0.0.1:$p" \
    --auto-compaction-mode periodic --auto-compaction-retention 1h >/dev/null 2>&1 &
until curl -fs "http://127.0.0.1:$c/health" >/dev/null 2>&1; do sleep 0.1; done
build/daemon/snowidd --config /dev/null --etcd "http://127.0.0.1:$c" --instance "$inst" 2>/dev/null &
daemon=$!
until build/cli/snowid status --instance "$inst" 2>/dev/null | grep -q leased; do sleep 0.1; done
count() {
    curl -s "http://127.0.0.1:$c/metrics" | awk '
        /^grpc_server_handled_total/ && /grpc_type="unary"/ { n += $NF }
        /^grpc_server_msg_received_total/ && /grpc_method="LeaseKeepAlive"/ { n += $NF }
        END { print n }'
}
a=$(count)
sleep "$secs"
b=$(count)
rss=$(awk '/VmRSS/ {print $2}' /proc/$daemon/status)
echo "etcd requests/s from one snowidd at rest: $(python3 -c "print(round(($b - $a) / $secs, 2))") (over $secs s, renew-interval 1000 ms, mark-step 5 s)"
echo "snowidd resident memory: $rss KiB"
