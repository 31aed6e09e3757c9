#!/usr/bin/env bash
# Model-checks snowid.pml with spin.  The model is searched exhaustively in
# three configurations, each small enough to finish in a few minutes, and must
# pass in all; each mutant must fail, with a counterexample, in the
# configuration that can show its failure (where the model passes).
# Usage: model/check.sh [-k]   (-k keeps the work directory)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/snowid-model.XXXXXX)
if [ "${1:-}" = "-k" ]; then echo "work: $work"; else trap 'rm -rf "$work"' EXIT; fi
command -v spin >/dev/null || { echo "spin is not installed (apt-get install spin)"; exit 2; }

# configurations: name, spin -D flags, what it is for
declare -A cfg=(
    [fence]="-DC=1 -DT=4 -DW=0 -DRENEWALS=0 -DCRASHES=0 -DLMAX=3 -DIDS=1 -DTRIES=1"
    [renew]="-DC=1 -DT=5 -DW=1 -DRENEWALS=2 -DCRASHES=0 -DLMAX=2 -DIDS=1 -DTRIES=1"
    [crash]="-DC=2 -DT=4 -DW=1 -DRENEWALS=1 -DCRASHES=1 -DLMAX=2 -DIDS=1 -DTRIES=1"
)
declare -A about=(
    [fence]="three claims of one number in turn (A, B, A), takeover, late and lost claims"
    [renew]="renewals applied late, after later ones; a lease expiring under its holder"
    [crash]="2 clients per host; a daemon killed mid-claim, mid-switch, mid-renewal"
)
mutants=(1:renew 2:fence 3:fence 4:renew 5:fence)
declare -A mname=(
    [1]="the deadline published before etcd acknowledged the mark"
    [2]="the client skips its second read of gen"
    [3]="a claimed number starts at now, not max(now, hwm + 1)"
    [4]="the renewal guarded only on the lease, not on the stored mark being lower"
    [5]="several claim attempts under one lease, the read-back adopting the last"
)

# verify NAME FLAGS -> runs pan in $work/NAME, prints nothing
verify() {
    local d="$work/$1"
    mkdir -p "$d"
    (cd "$d" && spin $2 -a "$here/snowid.pml" >/dev/null &&
        gcc -O2 -w -DSAFETY -DCOLLAPSE -DVECTORSZ=2048 -DMEMLIM=10000 -o pan pan.c &&
        /usr/bin/time -f "%e" -o time.txt ./pan -m100000 -E -c1 >out.txt 2>&1)
}
field() { sed -n "$2" "$work/$1/out.txt" | tail -1; }

# the model, in each configuration (two at a time: two cores)
pids=()
for c in fence renew crash; do
    verify "model-$c" "${cfg[$c]}" &
    pids+=($!)
    [ ${#pids[@]} -ge 2 ] && { wait "${pids[0]}"; pids=("${pids[@]:1}"); }
done
wait
passed=0 failed=0
for c in fence renew crash; do
    n="model-$c"
    errors=$(field "$n" 's/.*errors: \([0-9]*\).*/\1/p')
    states=$(field "$n" 's/^ *\([0-9.e+]*\) states, stored.*/\1/p')
    depth=$(field "$n" 's/.*depth reached \([0-9]*\).*/\1/p')
    if [ "$errors" = 0 ] && ! grep -q "search not completed\|max search depth too small\|out of memory" "$work/$n/out.txt"; then
        echo "ok: the model holds in '$c' (${about[$c]}): $states states, depth $depth, $(cat "$work/$n/time.txt") s, exhaustive"
        passed=$((passed + 1))
    else
        echo "FAIL: the model in '$c': errors=$errors"
        tail -25 "$work/$n/out.txt"
        failed=$((failed + 1))
    fi
done

for mc in "${mutants[@]}"; do
    m=${mc%%:*} c=${mc#*:}
    n="mutant-$m"
    verify "$n" "-DMUTANT=$m ${cfg[$c]}"
    errors=$(field "$n" 's/.*errors: \([0-9]*\).*/\1/p')
    if [ "${errors:-0}" -gt 0 ]; then
        why=$(grep -m1 -o "assertion violated.*(at depth [0-9]*)" "$work/$n/out.txt")
        (cd "$work/$n" && spin -DMUTANT=$m ${cfg[$c]} -t -p "$here/snowid.pml" >trail.txt 2>&1)
        echo "ok: mutant $m (${mname[$m]}) is caught in '$c': $why"
        passed=$((passed + 1))
    else
        echo "FAIL: mutant $m (${mname[$m]}) was not caught in '$c'"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
