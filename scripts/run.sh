#!/usr/bin/env bash
# The quick start: installs what is needed, builds, starts a throwaway etcd
# on 127.0.0.1 and snowidd, prints some IDs and the status, and keeps them
# running until Ctrl-C, when it stops everything and removes what it made.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
[ -d build ] || meson setup build -Dbindings=disabled >/dev/null   # the clients in other languages: -Dbindings=enabled
meson compile -C build >/dev/null

work=$(mktemp -d /tmp/snowid-run.XXXXXX)
instance=${SNOWID_INSTANCE:-default}
pids=()
cleanup() {
    trap - EXIT INT TERM
    echo
    echo "stopping snowidd and etcd"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -f /run/snowid/"$instance".{sock,lock}
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cport=$(port) pport=$(port)
etcd --name run --data-dir "$work/etcd" --log-level error \
    --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
    --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "run=http://127.0.0.1:$pport" \
    --auto-compaction-mode periodic --auto-compaction-retention 1h \
    --quota-backend-bytes 8589934592 >"$work/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$cport/health" >/dev/null 2>&1 && break
    sleep 0.1
done
echo "etcd on 127.0.0.1:$cport"

http=${SNOWID_HTTP:-127.0.0.1:7723}
build/daemon/snowidd --config /dev/null --etcd "http://127.0.0.1:$cport" --instance "$instance" \
    --http "$http" 2>"$work/snowidd.log" &
pids+=($!)
for _ in $(seq 100); do
    build/cli/snowid status --instance "$instance" 2>/dev/null | grep -q "state: *leased" && break
    sleep 0.1
done
echo "snowidd is running (log: $work/snowidd.log)"
echo
echo "\$ snowid next -n 5"
build/cli/snowid next -n 5 --instance "$instance"
echo
echo "\$ snowid decode \$(snowid next)"
build/cli/snowid decode --instance "$instance" "$(build/cli/snowid next --instance "$instance")"
echo
echo "\$ snowid status"
build/cli/snowid status --instance "$instance"
echo
echo "\$ curl -s -X POST 'http://$http/v1/ids?count=3'"
curl -s -X POST "http://$http/v1/ids?count=3"
echo
echo
echo "Running; try: build/cli/snowid next -n 3 --instance $instance"
echo "              curl -s http://$http/v1/status ; curl -s http://$http/metrics"
echo "(Ctrl-C stops everything)"
wait "${pids[1]}"
