#!/usr/bin/env bash
# What coordination costs, with etcd or with PostgreSQL as the store:
# - one snowidd at rest: the store's requests per second, counted by the
#   store itself (etcd: gRPC calls handled, which the HTTP gateway turns
#   requests into, and the keepalive stream's messages; PostgreSQL:
#   statements run, from pg_stat_statements: one verb's function each), and
#   the daemon's resident memory;
# - the claim storm: N daemons started at the same moment
#   (bench/claim-storm.py), the time until every one is READY.
# One line per figure; bench/results/coordination.md gets the table of both
# stores (a run replaces its stores' rows, kept in coordination.tsv beside it).
# Usage: bench/coordination.sh [--store etcd|postgres|both] [--storm N[,N...]|none] [SECONDS]
#   (default: etcd, storms of 20 and 200 daemons, 30 s at rest)
set -euo pipefail
cd "$(dirname "$0")/.."
stores=etcd storms=20,200 secs=30
while [ $# -gt 0 ]; do
    case "$1" in
    --store) stores=${2:?--store etcd|postgres|both}; shift ;;
    --store=*) stores=${1#*=} ;;
    --storm) storms=${2:?--storm N[,N...]|none}; shift ;;
    --storm=*) storms=${1#*=} ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) secs=$1 ;;
    esac
    shift
done
case "$stores" in
etcd | postgres) ;;
both) stores="etcd postgres" ;;
*) echo "coordination: --store etcd, postgres or both, not '$stores'" >&2; exit 2 ;;
esac
[ "$storms" = none ] && storms=
pgbin=${SNOWID_PGBIN:-/usr/lib/postgresql/15/bin}
[ -x build/daemon/snowidd ] || { meson setup build >/dev/null; meson compile -C build >/dev/null; }
work=$(mktemp -d)
inst=coord-$$
pg=
# shellcheck disable=SC2317 # (called by the trap)
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    # PostgreSQL: an immediate shutdown, whoever its clients were
    [ -n "$pg" ] && kill -QUIT "$pg" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$work" "$work.run"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# polls a command until it succeeds, for at most $1 seconds
until_ok() {
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$end" ] || { echo "coordination: timed out waiting for: $*" >&2; exit 1; }
        sleep 0.1
    done
}
# the daemons' sockets: a directory writable by its owner only, as clients insist
mkdir -m 0755 "$work.run"
export SNOWID_RUNTIME_DIR=$work.run
row() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$work/rows"; }
: >"$work/rows"

start_etcd() {
    c=$(port) p=$(port)
    etcd --name b --data-dir "$work/e" --log-level error \
        --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
        --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
        --initial-cluster "b=http://127.0.0.1:$p" \
        --auto-compaction-mode periodic --auto-compaction-retention 1h >/dev/null 2>&1 &
    store=$!
    until_ok 30 curl -fs "http://127.0.0.1:$c/health"
    flags=(--etcd "http://127.0.0.1:$c")
}
count_etcd() {
    curl -s "http://127.0.0.1:$c/metrics" | awk '
        /^grpc_server_handled_total/ && /grpc_type="unary"/ { n += $NF }
        /^grpc_server_msg_received_total/ && /grpc_method="LeaseKeepAlive"/ { n += $NF }
        END { print n }'
}

# PostgreSQL 15 of its own, on loopback, trusted (no password); as the
# postgres user when run as root (initdb and postgres refuse root);
# pg_stat_statements counts what the daemons send; room for 200 daemons
owner=()
[ "$(id -u)" = 0 ] && owner=(setpriv --reuid=postgres --regid=postgres --init-groups --)
start_postgres() {
    [ -x "$pgbin/postgres" ] || { echo "coordination: PostgreSQL 15 is not installed ($pgbin)" >&2; exit 1; }
    mkdir -m 0755 "$work/pg"
    [ "$(id -u)" = 0 ] && chown postgres: "$work/pg"
    chmod 0755 "$work"
    "${owner[@]}" "$pgbin/initdb" -D "$work/pg/data" -U postgres --auth=trust -E UTF8 --locale=C \
        >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log" >&2; exit 1; }
    q=$(port)
    # setpriv execs: $! is the server itself
    "${owner[@]}" "$pgbin/postgres" -D "$work/pg/data" -h 127.0.0.1 -p "$q" -k "$work/pg" \
        -c max_connections=300 -c shared_preload_libraries=pg_stat_statements \
        >"$work/postgres.log" 2>&1 &
    store=$! pg=$!
    until_ok 60 "$pgbin/pg_isready" -q -h "$work/pg" -p "$q"
    sql "CREATE EXTENSION pg_stat_statements"
    flags=(--store postgres --postgres "host=127.0.0.1 port=$q user=postgres dbname=postgres")
}
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$work/pg" -p "$q" -U postgres -d postgres -c "$1"; }
count_postgres() { sql "SELECT sum(calls) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'"; }

stop_store() {
    if [ -n "$pg" ]; then
        kill -INT "$pg"
        wait "$pg" || true
        pg=
    else
        kill "$store"
        wait "$store" || true
    fi
}

for s in $stores; do
    "start_$s"
    build/daemon/snowidd --config /dev/null "${flags[@]}" --instance "$inst" \
        --runtime-dir "$work.run" 2>"$work/daemon-$s.log" &
    daemon=$!
    until_ok 60 sh -c "build/cli/snowid status --instance '$inst' | grep -q leased"
    a=$("count_$s")
    sleep "$secs"
    b=$("count_$s")
    rss=$(awk '/VmRSS/ {print $2}' /proc/$daemon/status)
    rate=$(python3 -c "print(round(($b - $a) / $secs, 2))")
    kill "$daemon"
    wait "$daemon" || true
    what=requests
    [ "$s" = postgres ] && what=queries
    echo "$s $what/s from one snowidd at rest: $rate (over $secs s, renew-interval 1000 ms, mark-step 5 s)"
    if [ "$s" = etcd ]; then
        echo "snowidd resident memory: $rss KiB"
    else
        echo "snowidd resident memory with $s: $rss KiB"
    fi
    storm=
    for n in ${storms//,/ }; do
        r=$(python3 bench/claim-storm.py --snowidd build/daemon/snowidd --count "$n" \
            --cluster "storm$n-$$" --log "$work/storm-$s-$n.log" -- "${flags[@]}") ||
            { tail -5 "$work/storm-$s-$n.log" >&2; exit 1; }
        read -r all first median < <(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["all_ready_s"], r["first_s"], r["median_s"])' "$r")
        echo "$s claim storm: $n daemons started at once, all READY after $all s (first $first s, median $median s)"
        storm="$storm${storm:+ }$n:$all"
    done
    row "$s" "$rate" "$rss" "$storm"
    stop_store
done

# the table: this run's rows, and the other store's from an earlier run
tsv=bench/results/coordination.tsv
touch "$tsv"
awk -F '\t' 'NR == FNR { new[$1] = 1; print; next } !($1 in new)' "$work/rows" "$tsv" |
    sort >"$work/all"
cp "$work/all" "$tsv"
python3 - "$tsv" "$(nproc)" >bench/results/coordination.md <<'EOF'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
sizes = sorted({int(x.split(":")[0]) for r in rows for x in r[3].split() if x})
print("# Coordination: what one host costs its store, and a claim storm\n")
print("Written by `bench/coordination.sh` (" + sys.argv[2] + " cores, the store and every daemon "
      "on this one machine; renew-interval 1000 ms, mark-step 5 s, lease-ttl 10 s).")
print("At rest: one snowidd holding its number; requests counted by the store (etcd: gRPC calls "
      "and keepalive messages; PostgreSQL: statements, from pg_stat_statements, each one "
      "verb's function in a transaction of its own). Claim storm: N daemons released at the same "
      "moment, each with its own instance, until the last one is READY.\n")
head = ["store", "requests/s per host at rest", "snowidd RSS"] + [
    f"claim storm: {n} daemons to READY" for n in sizes]
print("| " + " | ".join(head) + " |")
print("|" + " --- |" * len(head))
for store, rate, rss, storm in rows:
    got = dict(x.split(":") for x in storm.split() if x)
    cells = [store, rate, f"{int(rss) / 1024:.1f} MiB"] + [
        f"{float(got[str(n)]):.2f} s" if str(n) in got else "-" for n in sizes]
    print("| " + " | ".join(cells) + " |")
EOF
echo "table: bench/results/coordination.md"
