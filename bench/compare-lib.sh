#!/usr/bin/env bash
# What a change to libsnowid costs: builds libsnowid at an earlier revision
# (default: the last one before the TSC clock) and runs this tree's
# bench/snowid-bench --clock-only against both libraries in turn, RUNS times
# each, alternating.  A library from before the TSC clock never reads the TSC
# line, so both of its snowid columns are the vDSO path; this tree's "vDSO
# clock" column is the same path with the TSC clock off.  Prints each run's
# median row.
#
#   bench/compare-lib.sh [--rev REV] [--runs N] [--rounds N] [--seconds S] [BUILD_DIR]
set -euo pipefail
rev=8aa086b
runs=3
rounds=4
seconds=0.3
while [ $# -gt 0 ]; do
    case "$1" in
    --rev) rev="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
build="$(realpath "${1:-build}")"
src="$(git rev-parse --show-toplevel)"
tmp="$(mktemp -d /tmp/snowid-compare-XXXXXX)"
cleanup() {
    git -C "$src" worktree remove --force "$tmp/src" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
git -C "$src" worktree add --detach "$tmp/src" "$rev" >/dev/null 2>&1
meson setup "$tmp/build" "$tmp/src" -Dbindings=disabled -Dtests=false >/dev/null
# the library's file name carries its version, which differs between revisions
lib_target=$(ninja -C "$tmp/build" -t targets all | grep -o '^libclient/libsnowid\.so\.[0-9.]*[0-9]' | head -1)
ninja -C "$tmp/build" "$lib_target" >/dev/null
ninja -C "$build" bench/snowid-bench >/dev/null

echo "| library | TSC clock (ns/ID) | vDSO clock | lockfree | floor | TSC / lockfree | vDSO / lockfree | TSC / floor | vDSO floor | vDSO / vDSO floor |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for i in $(seq "$runs"); do
    for lib in this "$rev"; do
        if [ "$lib" = this ]; then
            libdir=""
        else
            libdir="$tmp/build/libclient"
        fi
        row=$(LD_LIBRARY_PATH="$libdir" "$build/bench/snowid-bench" --clock-only \
            --rounds "$rounds" --seconds "$seconds" | grep 'median of')
        # "| **median of 4** | | **a** | **b** | **c** | **f** | **x** | **y** | **z** | **g** | **w** |"
        echo "$row" | tr -d '*' | awk -F'|' -v lib="$lib" \
            '{printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", lib, $4, $5, $6, $7, $8, $9, $10, $11, $12}' | tr -s ' '
    done
done
