#!/usr/bin/env bash
# The test command: installs what is needed, builds, and runs every test,
# once plainly and once under AddressSanitizer + UndefinedBehaviorSanitizer.
# Ends with one line "N passed, N failed" over every test it ran.
set -uo pipefail
cd "$(dirname "$0")/.."
# what the steps print at length goes to logs/ (ignored by git), not the
# repository's root
mkdir -p logs

bash scripts/deps.sh --test || exit 1

passed=0
failed=0
count() { # count BUILDDIR: adds that run's results to the totals
    local log="$1/meson-logs/testlog.json" p f
    if [ ! -f "$log" ]; then failed=$((failed + 1)); return; fi
    read -r p f < <(python3 -c '
import json, sys
p = f = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"): p += 1
    elif r != "SKIP": f += 1
print(p, f)' "$log")
    passed=$((passed + p))
    failed=$((failed + f))
}

one() { # one NAME COMMAND...: a test outside meson
    local name="$1"; shift
    echo "== $name"
    if "$@"; then passed=$((passed + 1)); else echo "FAILED: $name"; failed=$((failed + 1)); fi
}

configured() { [ -f "$1/meson-private/coredata.dat" ]; } # configured BUILDDIR
setup() { # setup BUILDDIR [meson options...]: configured afresh, or reconfigured
    # (a directory meson cannot read, e.g. from a failed setup, is remade)
    local dir="$1"; shift
    if configured "$dir"; then
        meson setup --reconfigure "$dir" "$@" >/dev/null
    else
        rm -rf "$dir" && meson setup "$dir" "$@" >/dev/null
    fi
}

run_suite() { # run_suite BUILDDIR [meson options...]
    local dir="$1"; shift
    echo "== $dir: $*"
    setup "$dir" "$@" || { failed=$((failed + 1)); return; }
    if ! meson compile -C "$dir" >"logs/$dir.compile.log" 2>&1; then
        cat "logs/$dir.compile.log"
        failed=$((failed + 1))
        return
    fi
    rm -f "$dir/meson-logs/testlog.json"
    meson test -C "$dir" --print-errorlogs --num-processes 2 "${TEST_ARGS[@]}"
    count "$dir"
}

TEST_ARGS=()
add_counts() { # add_counts LOG RC: adds the "N passed, N failed" line a runner
    # ended LOG with; a runner that exited non-zero with no failure counted
    # (stopped early, or no such line) counts as one failure more
    local p f
    read -r p f < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$1" | tail -1)
    [ "$2" -ne 0 ] && [ "${f:-0}" -eq 0 ] && f=1
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-1}))
}

# the protocol model: spin, exhaustively, and the mutants it must reject.  It
# is CPU alone (minutes of it) and needs nothing the other tests start, so it
# runs beside them at idle priority (SCHED_IDLE: it gets a CPU only when no
# test wants one, so the tests' timings are not disturbed), read at the end
to_idle() { # to_idle PID: the process (and what it starts from now on) at idle priority
    chrt --idle -p 0 "$1" >/dev/null 2>&1 || renice -n 19 -p "$1" >/dev/null
}
(to_idle "$BASHPID"; exec bash model/check.sh) >logs/model-check.log 2>&1 &
model_pid=$!
# the jobs in the background end with this script, however it ends
kill_tree() { # kill_tree PID: the process and everything it started
    local c
    for c in $(pgrep -P "$1"); do kill_tree "$c"; done
    kill "$1" 2>/dev/null
}
trap 'for j in $(jobs -p); do kill_tree "$j"; done' EXIT

one clang-format bash scripts/format.sh --check

# the sanitizer and fuzzer builds compile beside the plain tests, likewise
# at idle priority (those tests mostly wait); their runs below find them built
asan_opts=(-Db_sanitize=address,undefined -Db_lundef=false -Dbindings=disabled)
tsan_opts=(-Db_sanitize=thread -Db_lundef=false -Dc_args=-Wno-tsan -Dbindings=disabled)
fuzz_opts=(-Dfuzz=true -Dtests=false -Dbindings=disabled -Db_sanitize=address,undefined
    -Db_lundef=false)
(
    to_idle "$BASHPID"
    setup build-asan "${asan_opts[@]}" && meson compile -C build-asan
    setup build-tsan "${tsan_opts[@]}" && meson compile -C build-tsan
    CC=clang setup build-fuzz "${fuzz_opts[@]}" && meson compile -C build-fuzz
) >/dev/null 2>&1 &
prebuild_pid=$!

export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
run_suite build -Dbindings=enabled
# a failed or unfinished build is redone (and its errors shown) below
wait "$prebuild_pid"
# the PostgreSQL runs of the tests shared with etcd, and the SQL-only test,
# add no C code to what the sanitizers see; the long waits run once, plainly
TEST_ARGS=(--no-suite store-shared --no-suite sql --no-suite long)
ASAN_OPTIONS=detect_leaks=1 run_suite build-asan "${asan_opts[@]}"
TEST_ARGS=()

# ThreadSanitizer: the multi-thread and multi-process clients, and the daemon
# with its HTTP threads.  GCC warns that TSan does not model atomic fences
# (-Wtsan): every access to the shared segment is atomic, so no report can
# come from it either way; the fence orderings are what model/ checks.
TEST_ARGS=(client multiproc tsc ratelimit etcd-daemon etcd-http etcd-http-limits)
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
    run_suite build-tsan "${tsan_opts[@]}"
TEST_ARGS=()

# libFuzzer (clang, ASan + UBSan): each target from the seed corpus in fuzz/
# for FUZZ_SECONDS; a crash, a sanitizer report or a hang fails it and leaves
# the input in build-fuzz/run-TARGET/
fuzz_one() { # fuzz_one TARGET
    local t="$1" dir="build-fuzz/run-$1" dict=()
    rm -rf "$dir" && mkdir -p "$dir/corpus"
    [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
    # the targets' own stderr is kept only where it is quiet (fuzz-http)
    local mask=3
    [ "$t" = http ] && mask=1
    if build-fuzz/fuzz/fuzz-"$t" -max_total_time="${FUZZ_SECONDS:-8}" -timeout=10 \
        -close_fd_mask="$mask" -artifact_prefix="$dir/" "${dict[@]}" "$dir/corpus" "fuzz/corpus/$t" \
        >"$dir/log" 2>&1; then
        grep -E "^#[0-9]+[[:space:]]+DONE" "$dir/log" | tail -1
    else
        tail -60 "$dir/log"
        return 1
    fi
}
echo "== build-fuzz: -Dfuzz=true -Db_sanitize=address,undefined (clang)"
if CC=clang setup build-fuzz "${fuzz_opts[@]}" && meson compile -C build-fuzz >logs/build-fuzz.compile.log 2>&1; then
    # two at a time (each is one process, busy for FUZZ_SECONDS)
    targets=(http etcd config segment handshake)
    for ((i = 0; i < ${#targets[@]}; i += 2)); do
        pids=()
        for t in "${targets[@]:i:2}"; do
            (ASAN_OPTIONS=detect_leaks=1 fuzz_one "$t" >"logs/fuzz-$t.out" 2>&1) &
            pids+=($!)
        done
        for j in "${!pids[@]}"; do
            wait "${pids[j]}"
            rc=$?
            t=${targets[i + j]}
            one "fuzz-$t" bash -c 'cat "$1"; exit "$2"' _ "logs/fuzz-$t.out" "$rc"
        done
    done
else
    cat logs/build-fuzz.compile.log
    failed=$((failed + 1))
fi

# the chaos test's checker, then a short chaos run: 4 hosts in network
# namespaces, a 3-member etcd, faults from a seed (its own python: numpy)
one chaos-checker /usr/bin/python3 tests/chaos/test_checker.py
one chaos /usr/bin/python3 tests/chaos/chaos.py --build build --duration "${CHAOS_SECONDS:-40}"

# the Debian packages: built, linted, installed in a container, an ID taken
echo "== tests/package/test-deb.sh"
# (its own cleanup runs on the timeout's SIGTERM)
rm -rf logs/debs
SNOWID_KEEP_DEBS=$PWD/logs/debs timeout -k 30 900 bash tests/package/test-deb.sh >logs/package.log 2>&1
package_rc=$?
grep -E "^(not ok|ok) " logs/package.log | grep -c "^ok" | sed 's/$/ package checks passed/'
grep -E "^not ok" logs/package.log && tail -40 logs/package.log
add_counts logs/package.log "$package_rc"

# the container images, built from those packages (or anew, if they are
# missing), and the Kubernetes manifests played with podman
echo "== tests/kubernetes/test-kube.py"
debs=()
[ -d logs/debs ] && debs=(--debs logs/debs)
timeout -k 30 1500 /usr/bin/python3 tests/kubernetes/test-kube.py "${debs[@]}" >logs/kube.log 2>&1
kube_rc=$?
grep -E "^(not ok|ok) " logs/kube.log | grep -c "^ok" | sed 's/$/ container checks passed/'
grep -E "^# figure:|built both images" logs/kube.log
grep -E "^not ok" logs/kube.log && tail -40 logs/kube.log
add_counts logs/kube.log "$kube_rc"

echo "== model/check.sh (started at the beginning)"
wait "$model_pid"
model_rc=$?
cat logs/model-check.log
add_counts logs/model-check.log "$model_rc"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
