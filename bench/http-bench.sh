#!/usr/bin/env bash
# HTTP API benchmark: wrk against snowidd on loopback, beside nginx answering
# a fixed 200 with the same wrk settings (the ceiling of HTTP serving here).
# Writes bench/results/http.md and bench/results/http.png.
# Usage: bench/http-bench.sh [SECONDS]   (default 5 per run)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
conns=${CONNS:-32}
threads=${WRK_THREADS:-1}
out=bench/results
mkdir -p "$out"
for p in wrk nginx gnuplot; do
    command -v "$p" >/dev/null || { echo "http-bench: $p is not installed (apt-get install wrk nginx-light gnuplot-nox)"; exit 1; }
done
[ -x build/daemon/snowidd ] || { meson setup build >/dev/null; meson compile -C build >/dev/null; }

work=$(mktemp -d)
inst=httpbench-$$
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work" /run/snowid/$inst.*
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

c=$(port) p=$(port) hp=$(port) np=$(port)
etcd --name b --data-dir "$work/e" --log-level error \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "b=http://127.0.0.1:$p" >/dev/null 2>&1 &
pids+=($!)
until curl -fs "http://127.0.0.1:$c/health" >/dev/null 2>&1; do sleep 0.1; done
build/daemon/snowidd --config /dev/null --etcd "http://127.0.0.1:$c" --instance "$inst" \
    --http "127.0.0.1:$hp" --http-threads "${HTTP_THREADS:-1}" --http-address-ids 0 \
    2>"$work/snowidd.log" &
pids+=($!)
until curl -fs "http://127.0.0.1:$hp/healthz" >/dev/null 2>&1; do sleep 0.1; done
# the rate limiter: two more daemons with one token, one with every limit
# off, one with limits that are checked on every request but never reached
lp=$(port) op=$(port)
echo "bench s3cret-bench-token" >"$work/tokens-off"
echo "bench s3cret-bench-token ids=1000000000 requests=1000000000" >"$work/tokens-on"
build/daemon/snowidd --config /dev/null --etcd "http://127.0.0.1:$c" --instance "$inst-off" \
    --http "127.0.0.1:$op" --http-threads "${HTTP_THREADS:-1}" --http-token-file "$work/tokens-off" \
    --http-address-ids 0 --http-address-requests 0 2>"$work/snowidd-off.log" &
pids+=($!)
build/daemon/snowidd --config /dev/null --etcd "http://127.0.0.1:$c" --instance "$inst-on" \
    --http "127.0.0.1:$lp" --http-threads "${HTTP_THREADS:-1}" --http-token-file "$work/tokens-on" \
    --http-address-ids 1000000000 --http-address-requests 1000000000 2>"$work/snowidd-on.log" &
pids+=($!)
until curl -fs "http://127.0.0.1:$op/healthz" >/dev/null 2>&1 &&
      curl -fs "http://127.0.0.1:$lp/healthz" >/dev/null 2>&1; do sleep 0.1; done

mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$np;
        location / { default_type application/json; return 200 '{"ids":["252943551496990720"]}'; }
    }
}
NGINX
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
pids+=($!)
until curl -fs "http://127.0.0.1:$np/" >/dev/null 2>&1; do sleep 0.1; done

cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
LUA
cat >"$work/post-token.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer s3cret-bench-token"
LUA

# run NAME URL -> "rps p50_ms p90_ms p99_ms"
run() {
    local res
    res=$(wrk -t"$threads" -c"$conns" -d"${secs}s" --latency -s "$work/${3:-post}.lua" "$2")
    echo "$res" >"$work/$1.txt"
    echo "$res" | python3 -c '
import re, sys
t = sys.stdin.read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
def ms(p):
    m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)\s*$" % p, t, re.M)
    v, u = float(m.group(1)), m.group(2)
    return v / 1000 if u == "us" else v * 1000 if u == "s" else v
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print(rps, ms(50), ms(90), ms(99), non2xx.group(1) if non2xx else 0)'
}

read -r n_rps n_50 n_90 n_99 n_bad < <(run nginx "http://127.0.0.1:$np/v1/ids")
read -r s_rps s_50 s_90 s_99 s_bad < <(run snowid1 "http://127.0.0.1:$hp/v1/ids?count=1")
read -r k_rps k_50 k_90 k_99 k_bad < <(run snowid1000 "http://127.0.0.1:$hp/v1/ids?count=1000")
# limiter off and on, alternated five times each; the median of each
lim_off=() lim_on=()
for i in 1 2 3 4 5; do
    read -r r _ < <(run off$i "http://127.0.0.1:$op/v1/ids?count=1" post-token)
    lim_off+=("$r")
    read -r r _ < <(run on$i "http://127.0.0.1:$lp/v1/ids?count=1" post-token)
    lim_on+=("$r")
done
grep -q "Non-2xx" "$work"/on*.txt "$work"/off*.txt && { echo "http-bench: a limiter run had errors"; exit 1; }
off_csv=$(IFS=,; echo "${lim_off[*]}") on_csv=$(IFS=,; echo "${lim_on[*]}")

python3 - "$out" <<PY
import sys
out = sys.argv[1]
n_rps, s_rps, k_rps = $n_rps, $s_rps, $k_rps
ceiling = 4096000
rows = [
    ("nginx, fixed 200 (the ceiling of HTTP here)", n_rps, "", $n_50, $n_90, $n_99, $n_bad),
    ("snowidd POST /v1/ids?count=1", s_rps, f"{100 * s_rps / n_rps:.0f}% of nginx", $s_50, $s_90, $s_99, $s_bad),
    ("snowidd POST /v1/ids?count=1000", k_rps, f"{k_rps * 1000:,.0f} IDs/s = {100 * k_rps * 1000 / ceiling:.1f}% of the layout's ceiling", $k_50, $k_90, $k_99, $k_bad),
]
with open(f"{out}/http.md", "w") as f:
    f.write("wrk -t$threads -c$conns -d${secs}s, loopback, wrk on the same 2-core machine\n\n")
    f.write("| server | requests/s | ratio | p50 ms | p90 ms | p99 ms | non-2xx |\n| --- | ---: | --- | ---: | ---: | ---: | ---: |\n")
    for name, rps, ratio, p50, p90, p99, bad in rows:
        f.write(f"| {name} | {rps:,.0f} | {ratio} | {p50:.3f} | {p90:.3f} | {p99:.3f} | {bad} |\n")
with open(f"{out}/http.dat", "w") as f:
    f.write(f'"nginx 200" {n_rps/1000:.1f} 0\n"snowid count=1" {s_rps/1000:.1f} 0\n')
    f.write(f'"ceiling (IDs)" 0 {ceiling/1e6:.3f}\n"snowid count=1000 (IDs)" 0 {k_rps*1000/1e6:.3f}\n')
with open(f"{out}/http.md", "a") as f:
    off, on = sorted([$off_csv])[2], sorted([$on_csv])[2]
    f.write(f"\nRate limiter, count=1 with a bearer token, five runs each alternated, medians: "
            f"limits off {off:,.0f} requests/s, limits on (checked on every request, never "
            f"reached) {on:,.0f} requests/s: {100 * on / off:.1f}% "
            f"(runs off: {', '.join(f'{x:,.0f}' for x in [$off_csv])}; "
            f"on: {', '.join(f'{x:,.0f}' for x in [$on_csv])})\n")
print(open(f"{out}/http.md").read())
PY
gnuplot <<GP
set terminal pngcairo size 900,420 font ",10"
set output "$out/http.png"
set multiplot layout 1,2 title "snowidd HTTP API on loopback (wrk -t$threads -c$conns -d${secs}s)"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.7
set yrange [0:*]
set grid ytics
set title "requests per second (thousands)"
plot "$out/http.dat" every ::0::1 using 2:xtic(1) notitle lc rgb "#4477aa"
set title "IDs per second (millions), count=1000"
plot "$out/http.dat" every ::2::3 using 3:xtic(1) notitle lc rgb "#aa7744"
unset multiplot
GP
rm -f "$out/http.dat"
echo "wrote $out/http.md and $out/http.png"
