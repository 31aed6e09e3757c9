#!/usr/bin/env bash
# The clients in other languages, measured: for each language, its binding's
# next() and next_batch(64), that language's textbook Snowflake and UUID
# generator, and the HTTP API from that language, 1 and 2 threads, all in
# the same run against one snowidd (layout 33/10/20, whose ceiling of about
# one ID a nanosecond does not bind, as in bench/snowid-bench).  Each
# language's benchmark takes its rows in turn, in 3 rounds, and prints each
# row's median; with RUNS above 1 it runs again (languages alternating) and
# the table gives the median of the runs, with ratios to the same language's
# textbook generator.
# CLOCK is snowidd's --tsc-clock: on (the default; libsnowid reads the TSC
# line) or off (every client reads the vDSO's clock_gettime, as on hosts
# without an invariant TSC).
# Writes bench/results/bindings.md and .png (on), bindings-vdso.md and .png (off).
# Usage: bench/bindings.sh [RUNS] [SECONDS_PER_ROW] [CLOCK]   (default 1, 2, on)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
secs=${2:-2}
clock=${3:-on}
case "$clock" in
on) name=bindings ;;
off) name=bindings-vdso ;;
*) echo "bindings.sh: CLOCK is on or off" >&2; exit 2 ;;
esac
out=bench/results
mkdir -p "$out"
if [ ! -f build/bindings/benches.tsv ]; then
    meson setup build -Dbindings=enabled >/dev/null
fi
meson compile -C build >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SNOWID_BUILD=$PWD/build
# 35 time bits hold 397 days (snowidd refuses a layout that runs out within
# a year): the epoch is yesterday
epoch=$(( ($(date +%s) - 86400) * 1000 ))
layout=(--daemon-arg=--cluster=bench --daemon-arg=--epoch=$epoch --daemon-arg=--time-bits=35
        --daemon-arg=--worker-bits=8
        --daemon-arg=--seq-bits=20 --daemon-arg=--http-address-ids=0
        --daemon-arg=--tsc-clock=$clock)
mapfile -t benches < <(grep -v '^$' build/bindings/benches.tsv)
[ ${#benches[@]} -gt 0 ] || { echo "bindings.sh: no binding was built (build/bindings/benches.tsv)"; exit 1; }
for ((r = 1; r <= runs; r++)); do
    for line in "${benches[@]}"; do
        IFS=$'\t' read -r -a argv <<<"$line"
        lang=${argv[0]}
        echo "run $r/$runs: $lang" >&2
        python3 bindings/with_daemon.py --http "${layout[@]}" -- "${argv[@]:1}" --seconds "$secs" \
            >>"$work/all.tsv"
    done
done
cp "$work/all.tsv" "$out/$name.tsv"
{
    echo "# The bindings, measured"
    echo
    echo "\`bench/bindings.sh $runs $secs $clock\` on $(nproc) cores ($(uname -m)), $(date -u +%Y-%m-%d)."
    echo "ns per ID: each language's benchmark takes its rows in turn, 3 rounds of $secs s a row,"
    echo "and gives each row's median; the table's figure is the median of $runs such run(s)."
    echo "2 threads: wall time over all IDs.  Layout 35/8/20 (the ceiling does not bind)."
    echo "snowidd's TSC clock: $clock ($( [ "$clock" = on ] && echo "libsnowid reads the TSC line" || echo "every client reads clock_gettime through the vDSO" ))."
    echo "The ratios compare rows of the same language measured in the same runs."
    echo
    python3 bench/bindings-table.py "$work/all.tsv" - "$work/plot.dat"
} >"$out/$name.md.new"
mv "$out/$name.md.new" "$out/$name.md"
if command -v gnuplot >/dev/null; then
    gnuplot <<GP
set terminal pngcairo size 900,480
set output "$out/$name.png"
set title "ns per ID, one thread (log scale): each language's binding, textbook generator, UUID, HTTP API"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "ns per ID"
set key top left
set grid ytics
plot "$work/plot.dat" using 2:xtic(1) title "snowid binding", '' using 3 title "textbook Snowflake", \
     '' using 4 title "UUID", '' using 5 title "HTTP API"
GP
fi
cat "$out/$name.md"
