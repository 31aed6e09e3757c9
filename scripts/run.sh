#!/usr/bin/env bash
# The quick start: installs what is needed, builds, starts a throwaway etcd
# (or, with --store postgres, a throwaway PostgreSQL) on 127.0.0.1 and
# snowidd, prints some IDs and the status, and keeps them running until
# Ctrl-C, when it stops everything and removes what it made.
# Usage: scripts/run.sh [--store etcd|postgres]
# Environment: SNOWID_INSTANCE, the instance (default "default"); SNOWID_HTTP,
# the HTTP API's address (default 127.0.0.1:7723).
set -euo pipefail
cd "$(dirname "$0")/.."

store=etcd
case "${1:-}" in
    --store) store=${2:-} ;;
    --store=*) store=${1#--store=} ;;
    "") ;;
    *) echo "usage: scripts/run.sh [--store etcd|postgres]" >&2; exit 2 ;;
esac
case "$store" in
    etcd) bash scripts/deps.sh ;;
    postgres) bash scripts/deps.sh --postgres ;;
    *) echo "run.sh: --store is etcd or postgres, not '$store'" >&2; exit 2 ;;
esac
[ -d build ] || meson setup build -Dbindings=disabled >/dev/null   # the clients in other languages: -Dbindings=enabled
meson compile -C build >/dev/null

work=$(mktemp -d /tmp/snowid-run.XXXXXX)
instance=${SNOWID_INSTANCE:-default}
pids=()
cleanup() {
    trap - EXIT INT TERM
    echo
    echo "stopping snowidd and $store"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -f /run/snowid/"$instance".{sock,lock}
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cport=$(port) pport=$(port)
if [ "$store" = etcd ]; then
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
    store_args=(--etcd "http://127.0.0.1:$cport")
else
    # PostgreSQL will not run as root: its files belong to user postgres
    pgbin=/usr/lib/postgresql/15/bin
    chmod 755 "$work"
    install -d -o postgres -g postgres -m 700 "$work/pg"
    runuser -u postgres -- "$pgbin/initdb" -D "$work/pg" -A trust -U postgres >"$work/initdb.log"
    setpriv --reuid=postgres --regid=postgres --clear-groups "$pgbin/postgres" -D "$work/pg" -h 127.0.0.1 -p "$cport" -k "$work/pg" \
        >"$work/postgres.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$cport" && break
        sleep 0.1
    done
    echo "PostgreSQL on 127.0.0.1:$cport"
    store_args=(--store postgres --postgres "host=127.0.0.1 port=$cport user=postgres dbname=postgres")
fi

http=${SNOWID_HTTP:-127.0.0.1:7723}
build/daemon/snowidd --config /dev/null "${store_args[@]}" --instance "$instance" \
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
