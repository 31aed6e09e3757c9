#!/usr/bin/env bash
# snowid-bench's clock table, RUNS times (separate processes, so separate
# segments, handles and placements): one median row a run, then how many runs
# kept the TSC row within 0.5x the lock-free generator and 1.25x the floor.
#
#   bench/clock-runs.sh [--runs N] [--rounds N] [BUILD_DIR]
set -euo pipefail
runs=5
rounds=5
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
build="$(realpath "${1:-build}")"
ninja -C "$build" bench/snowid-bench >/dev/null

echo "| run | TSC clock (ns/ID) | vDSO clock | lockfree | floor | TSC / lockfree | vDSO / lockfree | TSC / floor | vDSO floor | vDSO / vDSO floor |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
within=0
for i in $(seq "$runs"); do
    row=$("$build/bench/snowid-bench" --clock-only --rounds "$rounds" | grep 'median of' | tr -d '*')
    # "| median of 5 | | a | b | c | f | x | y | z | g | w |"
    echo "$row" | awk -F'|' -v run="$i" \
        '{printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", run, $4, $5, $6, $7, $8, $9, $10, $11, $12}' | tr -s ' '
    if echo "$row" | awk -F'|' '{ x = $8 + 0; z = $10 + 0; exit !(x <= 0.5 && z <= 1.25) }'; then
        within=$((within + 1))
    fi
done
echo
echo "$within of $runs runs: TSC row at most 0.5x lockfree and at most 1.25x the floor (medians of $rounds rounds)."
