#!/usr/bin/env bash
# What a change to libsnowid costs on the vDSO path: builds libsnowid at an
# earlier revision (default: the last one before the TSC clock) and runs this
# tree's bench/snowid-bench against both libraries in turn, RUNS times each.
# A library from before the TSC clock never reads the TSC line, so both of
# its snowid columns are the vDSO path; this tree's "vDSO clock" column is
# the same path with the TSC clock off.  Prints each run's median row.
#
#   bench/compare-lib.sh [--rev REV] [--runs N] [BUILD_DIR]
set -euo pipefail
rev=8aa086b
runs=3
while [ $# -gt 0 ]; do
    case "$1" in
    --rev) rev="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
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
ninja -C "$tmp/build" libclient/libsnowid.so.1.1.0 >/dev/null
ninja -C "$build" bench/snowid-bench >/dev/null

echo "| library | TSC clock (ns/ID) | vDSO clock | lockfree | TSC / lockfree | vDSO / lockfree |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for i in $(seq "$runs"); do
    for lib in this "$rev"; do
        if [ "$lib" = this ]; then
            row=$("$build/bench/snowid-bench" --rounds 4 --seconds 0.3 | grep 'median of')
        else
            row=$(LD_LIBRARY_PATH="$tmp/build/libclient" "$build/bench/snowid-bench" --rounds 4 \
                --seconds 0.3 | grep 'median of')
        fi
        # "| **median of 4** | | **a** | **b** | **c** | **x** | **y** |"
        echo "$row" | tr -d '*' | awk -F'|' -v lib="$lib" \
            '{printf "| %s | %s | %s | %s | %s | %s |\n", lib, $4, $5, $6, $7, $8}' | tr -s ' '
    done
done
