#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The real unit under a real systemd: boots this machine's own root in a
# container (systemd-nspawn -D / --volatile=yes: / is an empty tmpfs, /usr is
# the host's, read-only), installs the unit meson generated from
# systemd/snowidd.service.in (ExecStart pointed at the build by a drop-in),
# systemd/snowid.sysusers and a config, and checks what systemctl,
# /run/snowid, /proc, the journal and real clients show: start (READY, STATUS,
# watchdog), who may take IDs, a restart while a client takes IDs (the fd
# store keeps the segment and the socket), and a clean stop.
#
#   tests/systemd/test-unit.sh [BUILDDIR [SRCDIR]]
#
# Needs root, systemd-nspawn (package systemd-container), etcd, nsenter and
# setpriv (util-linux).  Starts its own etcd on 127.0.0.1 (free ports); the
# container shares the host's network.  Prints "ok - ..." / "not ok - ..."
# per check; exit 0 if all pass, 1 if one fails, 77 if this machine cannot
# boot a container.  SNOWID_KEEP=1 keeps the files of a failed run.  The
# checks, the etcd and the container come from tests/lib/nspawn.sh, shared
# with tests/package/test-deb.sh.
set -uo pipefail

SRC=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
BUILD=$(cd "${1:-$SRC/build}" 2>/dev/null && pwd) || { echo "no build directory ${1:-$SRC/build}"; exit 1; }
CT_BUILD=/opt/snowid-build        # where the build appears inside
CT_SHARE=/snowid-test             # a directory shared with the container (the taker's output)
MEMBER=snowid-member              # in group snowid: may take IDs
OUTSIDER=snowid-outsider          # not in it: refused

t_start=$SECONDS
# log, ok, notok, check, give_up; etcd_*; nspawn_*, ct, prop, cleanup
# shellcheck source=tests/lib/nspawn.sh
. "$(dirname "$0")/../lib/nspawn.sh"
skip() { echo "# SKIP: $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip "needs root (systemd-nspawn boots the machine's own root)"
for tool in systemd-nspawn nsenter setpriv etcd curl python3; do
    command -v "$tool" >/dev/null || skip "no $tool (systemd-nspawn: apt-get install systemd-container)"
done
for bin in daemon/snowidd cli/snowid tests/snowid-taker; do
    [ -x "$BUILD/$bin" ] || { echo "not ok - $BUILD/$bin is missing: build first"; exit 1; }
done
[ -f "$BUILD/systemd/snowidd.service" ] ||
    { echo "not ok - $BUILD/systemd/snowidd.service is missing: an old build?"; exit 1; }
"$BUILD/daemon/snowidd" --help 2>&1 | grep -q -- --runtime-dir ||
    { echo "not ok - $BUILD/daemon/snowidd has no --runtime-dir: an old build?"; exit 1; }

name="snowid-t$$-$RANDOM"         # the machine's name (and its hostname)
cluster="nspawn-$$-$RANDOM"       # keys under /snowid/<cluster>/ in the test's etcd
tmp=$(mktemp -d /tmp/snowid-nspawn.XXXXXX)
mkdir -m 1777 "$tmp/share"
taker_ns_pid='' opener_ns_pid='' bg_pid=''

mono_ms() { python3 -c 'import time; print(int(time.monotonic() * 1000))'; }

# The same as USER (its own groups from the container's /etc/group), no PAM.
as_user() {
    local u="$1"; shift
    ct setpriv --reuid="$u" --regid="$(ct id -g "$u")" --init-groups -- "$@"
}
# as_user in the background: bg_pid is nsenter's, whose one child is the command
as_user_bg() {
    local u="$1" g; shift
    g=$(ct id -g "$u")
    nsenter --target "$leader" --all -- /usr/bin/env -i PATH=/usr/bin:/bin \
        setpriv --reuid="$u" --regid="$g" --init-groups -- "$@" &
    bg_pid=$!
}
journal() { ct timeout 30 journalctl -u snowidd.service --no-pager -o short-monotonic "$@"; }

# called by boot_failed (after the console's last lines)
on_boot_failure() { skip "systemd cannot boot in a container here: $*"; }
# called by cleanup, the container still up: the clients, then the journal
cleanup_inside() {
    for p in "$taker_ns_pid" "$opener_ns_pid"; do
        if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
            disown "$p" 2>/dev/null
            kill -KILL $(pgrep -P "$p") "$p" 2>/dev/null
        fi
    done
    if [ "$failed" -gt 0 ] && ct_up; then
        echo "# ---- journalctl -u snowidd (inside)"
        journal 2>&1 | tail -80 | sed 's/^/# /'
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---- etcd on loopback, started while the container boots
etcd_start

# ---- boot
# --volatile=yes: / is a fresh tmpfs with the host's /usr read-only, so /etc
# starts empty (a first boot: systemd fills in machine-id, presets and the
# base users from /usr/lib/sysusers.d); /usr/local/sbin is the host's, so the
# unit's ExecStart is pointed at the bound-in build.
nspawn_boot volatile --bind-ro="$BUILD:$CT_BUILD" --bind="$tmp/share:$CT_SHARE"
nspawn_wait_boot
case "$ct_state" in
running) ok "the container booted (pid 1 is host pid $leader, $((SECONDS - t_start)) s)" ;;
degraded)
    ok "the container booted, degraded (pid 1 is host pid $leader, $((SECONDS - t_start)) s)"
    ct systemctl --failed --no-legend --plain --no-pager | sed 's/^/# failed unit: /' ;;
*) boot_failed "the boot did not finish: state '${ct_state:-unknown}'" ;;
esac

if ! etcd_wait_healthy; then
    notok "etcd on $etcd_url is healthy"
    tail -20 "$tmp/etcd.log" | sed 's/^/# /'
    exit 1
fi

# ---- install: the unit as it is, a drop-in for ExecStart, the sysusers file, a config
ct mkdir -p /etc/systemd/system/snowidd.service.d /etc/sysusers.d /etc/snowid
ct tee /etc/systemd/system/snowidd.service >/dev/null <"$BUILD/systemd/snowidd.service"
# A sanitizer build (test.sh runs every test in build-asan too): LeakSanitizer
# stops the world with ptrace at exit, which the unit's SystemCallFilter
# denies, and snowidd then never exits (stop-sigterm times out).  Leaks are
# the other tests' business: here the sandbox, not the runtime, is under test.
sanitizer_env=
if grep -qa 'libasan\.so' "$BUILD/daemon/snowidd"; then
    sanitizer_env="Environment=ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
    log "an AddressSanitizer build: snowidd runs with detect_leaks=0"
fi
ct tee /etc/systemd/system/snowidd.service.d/50-test-build.conf >/dev/null <<EOF
[Service]
ExecStart=
ExecStart=$CT_BUILD/daemon/snowidd --config /etc/snowid/snowidd.conf
$sanitizer_env
EOF
ct tee /etc/sysusers.d/snowid.conf >/dev/null <"$SRC/systemd/snowid.sysusers"
ct tee /etc/snowid/snowidd.conf >/dev/null <<EOF
etcd = $etcd_url
cluster = $cluster
instance = default
allow-groups = snowid
http = 127.0.0.1:$http_port
log-level = debug
EOF
if out=$(ct systemd-sysusers 2>&1) && ct getent passwd snowid >/dev/null && ct getent group snowid >/dev/null; then
    ok "systemd-sysusers made user and group snowid ($(ct id snowid))"
else
    notok "systemd-sysusers made user and group snowid: $out"
    exit 1
fi
if out=$(ct sh -c "useradd --no-create-home --shell /usr/sbin/nologin --groups snowid $MEMBER &&
                   useradd --no-create-home --shell /usr/sbin/nologin $OUTSIDER" 2>&1); then
    ok "useradd made $MEMBER (in group snowid) and $OUTSIDER ($(ct id $MEMBER); $(ct id $OUTSIDER))"
else
    notok "useradd made $MEMBER and $OUTSIDER: $out"
    exit 1
fi
ct systemctl daemon-reload
ok "installed the unit, a drop-in running $CT_BUILD/daemon/snowidd, and /etc/snowid/snowidd.conf (cluster $cluster)"

# ---- start
t0=$SECONDS
if out=$(ct timeout 60 systemctl start snowidd.service 2>&1); then
    ok "systemctl start snowidd returned after $((SECONDS - t0)) s"
else
    notok "systemctl start snowidd: $out"
    ct systemctl status snowidd.service --no-pager -l 2>&1 | sed 's/^/# /'
    exit 1
fi
active=$(prop ActiveState) sub=$(prop SubState) status=$(prop StatusText) pid=$(prop MainPID)
check "the unit is active/running (READY=1 came): $active/$sub" \
    test "$active/$sub" = active/running
check "the unit has a status text: '$status'" test -n "$status"
wd_usec=$(prop WatchdogUSec)
check "the watchdog is enabled: WatchdogUSec=$wd_usec" test "$wd_usec" = 10s
wd_first=$(prop WatchdogTimestampMonotonic) wd_t0=$SECONDS
# (no awk inside: /etc/alternatives, where Debian's awk points, is empty there)
read -r _ uid euid suid fsuid < <(ct grep '^Uid:' "/proc/$pid/status")
snowid_uid=$(ct id -u snowid)
check "snowidd (pid $pid inside) runs as user snowid (uid $snowid_uid): uids $uid $euid $suid $fsuid" \
    test "$uid $euid $suid $fsuid" = "$snowid_uid $snowid_uid $snowid_uid $snowid_uid"
dir_stat=$(ct stat -c '%U:%G %a %F' /run/snowid 2>&1)
check "/run/snowid is snowid:snowid 0755: $dir_stat" test "$dir_stat" = "snowid:snowid 755 directory"
sock_stat=$(ct stat -c '%U %a %F' /run/snowid/default.sock 2>&1)
check "/run/snowid/default.sock is a socket of snowid, mode 0666: $sock_stat" \
    test "$sock_stat" = "snowid 666 socket"
memfds() { # memfds PID: "fd inode name" for each of the daemon's snowid memfds
    ct sh -c 'for f in /proc/$1/fd/*; do
        l=$(readlink "$f") || continue
        case "$l" in /memfd:snowid*) echo "${f##*/} $(stat -L -c %i "$f") $l" ;; esac
    done' sh "$1"
}
inodes() { awk '{ print $2 }' | sort -u | xargs; }
fds_before=$(memfds "$pid")
# the control object is held twice (read-write, and read-only for clients)
check "snowidd holds its two memfds: $(echo "$fds_before" | awk '{ printf "%sfd %s %s (inode %s)", s, $1, $3, $2; s = ", " }')" \
    test "$(echo "$fds_before" | inodes | wc -w)" -eq 2
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/healthz")
check "the HTTP API answers GET /healthz with 200 (got $code)" test "$code" = 200

# ---- who may take IDs (the default runtime dir: SNOWID_RUNTIME_DIR unset)
if ids=$(as_user "$MEMBER" "$CT_BUILD/cli/snowid" next -n 10 2>"$tmp/next.err"); then
    n=$(echo "$ids" | grep -cE '^[0-9]+$') distinct=$(echo "$ids" | grep -E '^[0-9]+$' | sort -u | wc -l)
    check "$MEMBER (group snowid) took 10 IDs with snowid next -n 10: $n IDs, $distinct distinct" \
        test "$n/$distinct" = 10/10
    echo "$ids" >"$tmp/next.ids"
else
    notok "$MEMBER (group snowid) took 10 IDs with snowid next -n 10: exit $?: $(cat "$tmp/next.err")"
fi
out=$(as_user "$OUTSIDER" "$CT_BUILD/cli/snowid" next -n 1 2>&1)
rc=$?
check "$OUTSIDER (not in group snowid) is refused, saying why: exit $rc: $out" \
    test "$rc" -ne 0 -a -n "$(echo "$out" | grep -i permission)"

# ---- the watchdog: sd-event pings at half the period or sooner; a new
# timestamp proves a ping after READY
wd_now=$wd_first
while [ "$wd_now" = "$wd_first" ] && [ $((SECONDS - wd_t0)) -lt 12 ]; do
    sleep 0.5
    wd_now=$(prop WatchdogTimestampMonotonic)
done
check "snowidd pings the watchdog (WatchdogTimestampMonotonic moved from $wd_first to $wd_now)" \
    test "$wd_now" != "$wd_first"

# ---- a restart while a client takes IDs
# 2 threads, each at most 20,000 IDs/s, giving up a call after 100 ms (an
# EAGAIN counts as an error), logging every stretch of 50 ms without an ID
as_user_bg "$MEMBER" "$CT_BUILD/tests/snowid-taker" -o "$CT_SHARE/ids" -t 2 -w 100000 -r 20000 -g 50 \
    >"$tmp/taker.out" 2>"$tmp/taker.err"
taker_ns_pid=$bg_pid
for _ in $(seq 100); do
    grep -q started "$tmp/taker.out" 2>/dev/null && break
    kill -0 "$taker_ns_pid" 2>/dev/null || break
    sleep 0.05
done
taker_pid=$(pgrep -P "$taker_ns_pid")   # nsenter forked it into the container's PID namespace
if ! grep -q started "$tmp/taker.out" 2>/dev/null || [ -z "$taker_pid" ]; then
    notok "the taker started as $MEMBER: $(cat "$tmp/taker.out" "$tmp/taker.err")"
    exit 1
fi
# and new clients, one snowid next after the other, until the file stop appears
as_user_bg "$MEMBER" sh -c 'n=0 f=0
        while [ ! -e "$1/stop" ]; do
            n=$((n + 1))
            "$2" next -n 1 >/dev/null 2>>"$1/opener.err" || f=$((f + 1))
        done
        echo "$n $f"' sh "$CT_SHARE" "$CT_BUILD/cli/snowid" >"$tmp/opener.out" 2>&1
opener_ns_pid=$bg_pid
sleep 1
old_pid=$pid
sock_ino_before=$(ct stat -c %i /run/snowid/default.sock)
t0=$SECONDS restart_begin=$(mono_ms)
restart_out=$(ct timeout 60 systemctl restart snowidd.service 2>&1)
restart_rc=$? restart_end=$(mono_ms)
pid=$(prop MainPID)
check "systemctl restart snowidd while the client takes IDs: exit $restart_rc in $((restart_end - restart_begin)) ms, pid $old_pid -> $pid${restart_out:+: $restart_out}" \
    test "$restart_rc" = 0 -a "$pid" != "$old_pid" -a "$pid" != 0
check "active/running again: $(prop ActiveState)/$(prop SubState), '$(prop StatusText)'" \
    test "$(prop ActiveState)/$(prop SubState)" = active/running
fds_after=$(memfds "$pid")
check "the new snowidd got the same two memfds from the fd store (inodes $(echo "$fds_before" | inodes) -> $(echo "$fds_after" | inodes))" \
    test -n "$fds_after" -a "$(echo "$fds_before" | inodes)" = "$(echo "$fds_after" | inodes)"
sock_ino_after=$(ct stat -c %i /run/snowid/default.sock 2>&1)
check "the listening socket survived the restart (socket inode $sock_ino_before -> $sock_ino_after)" \
    test "$sock_ino_before" = "$sock_ino_after"
# the running client maps the objects the new daemon holds
mapped=$(awk '$6 ~ /^\/memfd:snowid/ { print $5 }' "/proc/$taker_pid/maps" | sort -u | xargs)
daemon_inos=$(echo "$fds_after" | inodes)
check "the running client maps the new daemon's segment (client's memfd inodes: $mapped; daemon's: $daemon_inos)" \
    test -n "$mapped" -a "$mapped" = "$daemon_inos"
sleep 2       # IDs after the restart
touch "$tmp/share/stop"
kill -TERM "$taker_pid"
wait "$taker_ns_pid"
taker_rc=$? taker_ns_pid=
result=$(tail -1 "$tmp/taker.out")
log "taker: exit $taker_rc: $result"
python3 - "$tmp/share/ids" 2 "$restart_end" "$result" "$tmp/next.ids" >"$tmp/verdict" <<'EOF'
import json, struct, sys
prefix, threads, restart_end, result, next_ids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
seen, total, order = set(), 0, []
for t in range(threads):
    data = open(f"{prefix}.{t}", "rb").read()
    ids = struct.unpack(f"={len(data) // 8}Q", data)
    order += [f"thread {t}: {b} follows {a}" for a, b in zip(ids, ids[1:]) if b <= a][:3]
    total += len(ids)
    seen.update(ids)
    last = None
    for line in open(f"{prefix}.{t}.gaps"):
        k, v = line.split()[:2]
        if k == "last":
            last = int(v)
    order += [] if last and last > restart_end else [f"thread {t}: no ID after the restart (last {last}, restart done {restart_end})"]
try:
    seen_next = {int(x) for x in open(next_ids).read().split()}
except OSError:
    seen_next = set()
errors = result.get("eagain", 0) + result.get("other_errors", 0)
print(f"ids={total} distinct={len(seen)} also_in_next={len(seen & seen_next)} errors={errors} "
      f"errors_by={json.dumps(result.get('errors', {}))} max_gap_ms={result.get('max_gap_ms')} "
      f"problems={'; '.join(order) or 'none'}")
sys.exit(0 if total and total == len(seen) and not (seen & seen_next) and not order and errors == 0
         and result.get("ids") == total else 1)
EOF
verdict_rc=$?
check "the client took IDs through the restart, no errors, all unique, increasing: $(cat "$tmp/verdict") (exit $taker_rc)" \
    test "$verdict_rc" = 0 -a "$taker_rc" = 0
wait "$opener_ns_pid"
opener_ns_pid=
read -r opens open_failures <"$tmp/opener.out"
errs=$(sort "$tmp/share/opener.err" 2>/dev/null | uniq -c | sort -rn | head -3 | sed 's/^ *//' | paste -sd';')
check "clients that start during the restart are served: $opens runs of snowid next, ${open_failures:-?} failed${errs:+ ($errs)}" \
    test -n "$opens" -a "${open_failures:-1}" = 0
gaps=$(cat "$tmp/share/ids."*.gaps 2>/dev/null | awk 'NF == 2 && $1 ~ /^[0-9]+$/ { printf "%s%d ms at +%d ms", s, $2 - $1, $1 - '"$restart_begin"'; s = ", " }')
echo "# longest gap between two IDs of one client thread: $(echo "$result" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("max_gap_ms"))') ms; gaps >= 50 ms: ${gaps:-none} (the restart ran from +0 to +$((restart_end - restart_begin)) ms)"

# ---- after-run checks of the journal, then stop
nrestarts=$(prop NRestarts)
check "no automatic restarts (NRestarts=$nrestarts)" test "$nrestarts" = 0
bad=$(journal -o cat 2>&1 | grep -E 'SIGSYS|status=31/SYS|code=killed|code=dumped|[Ww]atchdog timeout|Failed with result')
check "the journal shows no crash, syscall-filter kill or watchdog timeout${bad:+: $bad}" test -z "$bad"
t0=$(mono_ms)
out=$(ct timeout 30 systemctl stop snowidd.service 2>&1)
stop_rc=$? stop_ms=$(($(mono_ms) - t0))
active=$(prop ActiveState) result=$(prop Result) main_code=$(prop ExecMainCode) main_status=$(prop ExecMainStatus)
check "systemctl stop snowidd: exit $stop_rc in $stop_ms ms, $active, Result=$result (main process: code $main_code, status $main_status)${out:+: $out}" \
    test "$stop_rc/$active/$result" = 0/inactive/success
bad=$(journal -o cat 2>&1 | grep -E 'SIGSYS|status=31/SYS|code=killed|code=dumped|[Ww]atchdog timeout|Failed with result|State .* timed out')
check "the journal of the whole run shows no failure${bad:+: $bad}" test -z "$bad"

echo "# $((SECONDS - t_start)) s; $failed failed"
[ "$failed" -eq 0 ]
