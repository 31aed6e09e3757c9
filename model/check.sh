#!/usr/bin/env bash
# Model-checks snowid.pml with spin.  The model is searched exhaustively in
# seven configurations, each small enough to finish in a few minutes, and must
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
    [del]="-DC=1 -DT=4 -DW=1 -DRENEWALS=1 -DCRASHES=0 -DLMAX=3 -DIDS=1 -DTRIES=1 -DDELS=1 -DLOSS=0"
    [restore]="-DC=1 -DT=4 -DW=1 -DRENEWALS=1 -DCRASHES=0 -DLMAX=2 -DIDS=1 -DTRIES=1 -DRESTORE=1 -DLOSS=0"
    [raise]="-DC=1 -DT=5 -DW=1 -DRENEWALS=2 -DCRASHES=0 -DLMAX=3 -DIDS=1 -DTRIES=1 -DRESTORE=1 -DLOSS=0 -DLOWFENCE=1 -DSTEADY=1"
    [move]="-DN=2 -DMOVES=1 -DC=1 -DT=4 -DW=1 -DRENEWALS=1 -DCRASHES=0 -DLMAX=3 -DIDS=2 -DTRIES=2 -DLOSS=0"
)
# a known hole, expected to fail (docs/fences.md, the procedure's step 3):
# requests reaching the restored cluster before `snowid fence`
known_cfg="-DC=1 -DT=4 -DW=1 -DRENEWALS=1 -DCRASHES=0 -DLMAX=2 -DIDS=1 -DTRIES=1 -DRESTORE=1 -DLOSS=0 -DGAP=1"

declare -A about=(
    [fence]="three claims of one number in turn (A, B, A), takeover, late and lost claims"
    [renew]="renewals applied late, after later ones; a lease expiring under its holder"
    [crash]="2 clients per host; a daemon killed mid-claim, mid-switch, mid-renewal"
    [del]="a mark deleted at any moment, held or not; no answer lost"
    [restore]="etcd restored to a snapshot of any moment, fenced at once; no answer lost"
    [raise]="a restore the fence's claims_above does not cover, the holders alive: re-raising alone"
    [move]="two numbers, a move to a fresh number at any point, 2 IDs per client; no answer lost"
)
mutants=(1:renew 2:fence 3:fence 4:renew 5:fence 6:raise 7:del 8:restore 9:restore 10:move)
declare -A mname=(
    [1]="the deadline published before etcd acknowledged the mark"
    [2]="the client skips its second read of gen"
    [3]="a claimed number starts at now, not max(now, hwm + 1)"
    [4]="the renewal guarded only on the lease, not on the stored mark being lower"
    [5]="several claim attempts under one lease, the read-back adopting the last"
    [6]="a lowered mark abandoned: no re-raise, a number given up unconfirmed"
    [7]="a claim of a number with no mark starts at max(now, 1), ignoring the floor"
    [8]="no fence compare, no revision check: a restored cluster extended and claimed"
    [9]="claims after a fence ignore claims_above"
    [10]="experiment: the within-client check expects a decrease (the check fires)"
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

# every search, configurations and mutants, at most two at a time (two
# cores), the longest first so that neither core waits at the end
pool() { # pool NAME FLAGS: starts one search, once fewer than two run
    while [ "$(jobs -pr | wc -l)" -ge 2 ]; do wait -n; done
    verify "$1" "$2" &
}
for c in crash move renew raise fence restore del; do
    pool "model-$c" "${cfg[$c]}"
done
for mc in "${mutants[@]}"; do
    m=${mc%%:*} c=${mc#*:}
    pool "mutant-$m" "-DMUTANT=$m ${cfg[$c]}"
done
pool known "$known_cfg"
wait
passed=0 failed=0
for c in fence renew crash del restore raise move; do
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
    errors=$(field "$n" 's/.*errors: \([0-9]*\).*/\1/p')
    if [ "${errors:-0}" -gt 0 ]; then
        why=$(grep -m1 -o "assertion violated.*(at depth [0-9]*)" "$work/$n/out.txt")
        (cd "$work/$n" && spin -DMUTANT=$m ${cfg[$c]} -t -k snowid.pml.trail -p "$here/snowid.pml" >trail.txt 2>&1)
        echo "ok: mutant $m (${mname[$m]}) is caught in '$c': $why"
        passed=$((passed + 1))
    else
        echo "FAIL: mutant $m (${mname[$m]}) was not caught in '$c'"
        failed=$((failed + 1))
    fi
done
errors=$(field known 's/.*errors: \([0-9]*\).*/\1/p')
if [ "${errors:-0}" -gt 0 ]; then
    why=$(grep -m1 -o "assertion violated.*(at depth [0-9]*)" "$work/known/out.txt")
    echo "known hole (expected to fail): a claim reaching a restored cluster before 'snowid fence' repeats IDs: $why"
else
    echo "note: the known hole (a claim before the fence) was not found; update this check"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
