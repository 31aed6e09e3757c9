# shellcheck shell=bash disable=SC2154 # (tmp and name: the script sets them)
# SPDX-License-Identifier: MIT
#
# What tests/package/test-deb.sh and tests/systemd/test-unit.sh share: TAP-
# style checks, an etcd of the test's own on loopback, and this machine's
# root booted under systemd in a container (systemd-nspawn), with commands
# run inside it.  Sourced, never run:
#
#   . "$(dirname "$0")/../lib/nspawn.sh"
#
# Sourcing it only defines functions and sets passed=0 failed=0 and empty
# nspawn_pid, leader, etcd_pid.  The script then sets, before it calls
# anything below:
#   tmp     a directory of its own (mktemp -d); etcd's data, etcd.log,
#           console.log (the container's console) and the overlay go there
#   name    the container's machine name and hostname, also etcd's cluster
#           token and the systemd scope's unit name
# and installs the traps:  trap cleanup EXIT; trap 'exit 130' INT TERM HUP
#
# Checks
#   log TEXT...        "# [HH:MM:SS] TEXT"
#   ok TEXT...         "ok - TEXT", counted in passed
#   notok TEXT...      "not ok - TEXT", counted in failed
#   check TEXT CMD...  runs CMD: ok TEXT if it succeeds, notok TEXT if not
#   give_up TEXT...    notok TEXT, then exit 1 (cleanup runs)
#
# The test's etcd
#   etcd_start          etcd on 127.0.0.1 in the background, data in
#                       $tmp/etcd, output in $tmp/etcd.log.  Sets etcd_pid,
#                       etcd_port, peer_port, etcd_url (http://127.0.0.1:PORT)
#                       and http_port: three ports free at the time, the
#                       third left for snowidd's HTTP API
#   etcd_wait_healthy   polls $etcd_url/health for up to 30 s; 0 once etcd
#                       says it is healthy, 1 if it never does or exits
#   etcd_stop           SIGTERM, SIGKILL after 5 s; nothing if not running
#
# The container
#   nspawn_boot ROOT [NSPAWN-OPTION...]
#       boots systemd in a container named $name in the background, its
#       console in $tmp/console.log; sets nspawn_pid.  ROOT is how the
#       host's root becomes the container's:
#         overlay   the host's whole tree (its /etc, its dpkg database) as the
#                   read-only lower layer of an overlay whose writes go to a
#                   tmpfs (uses $tmp/overlay)
#         volatile  systemd-nspawn --volatile=yes: / an empty tmpfs, /usr the
#                   host's, read-only; /etc starts empty (a first boot)
#       The options (--bind-ro=..., --bind=...) go to systemd-nspawn.
#   nspawn_wait_boot
#       waits up to 30 s for the container's PID 1 to be systemd (sets
#       leader, its host pid), then up to 60 s for the boot to end; sets
#       ct_state to what systemctl is-system-running said last.  0 if that
#       is running or degraded, 1 if not.  If nspawn exits or no systemd
#       comes up, calls boot_failed.
#   boot_failed TEXT...
#       prints the last 30 lines of the console, then calls the script's
#       on_boot_failure TEXT..., which must not return (give_up, or a skip)
#   ct CMD...     CMD inside the container, as root, with a clean
#                 environment, in every namespace of its PID 1 (nsenter
#                 forks into its PID namespace); needs leader
#   ct_up         0 if the container is running and its PID 1 known
#   prop NAME     snowidd.service's property NAME (systemctl show --value),
#                 inside the container
#   nspawn_halt   halts the container cleanly (SIGTERM to nspawn), kills it
#                 if it is not gone within 15 s; nothing if not running
#
# cleanup (the EXIT trap): calls the script's cleanup_inside if it defines
# one (the container still up, if it was: for a journal on failure, or
# background clients to end), then nspawn_halt, etcd_stop, removes $tmp
# (kept, and said so, when something failed and SNOWID_KEEP is set), calls
# the script's cleanup_done if it defines one (the last words), and exits:
# with the script's exit code, or 1 if that was 0 but a check failed.

passed=0 failed=0
nspawn_pid='' leader='' etcd_pid=''

log() { echo "# [$(date +%T)] $*"; }
ok() { echo "ok - $*"; passed=$((passed + 1)); }
notok() { echo "not ok - $*"; failed=$((failed + 1)); }
check() { # check DESCRIPTION CONDITION-COMMAND...
    local what="$1"; shift
    if "$@"; then ok "$what"; else notok "$what"; fi
}
give_up() { notok "$*"; exit 1; }

# ---- etcd on loopback
etcd_start() {
    # shellcheck disable=SC2034 # (http_port is the script's)
    read -r etcd_port peer_port http_port < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))')
    etcd_url="http://127.0.0.1:$etcd_port"
    etcd --name m0 --data-dir "$tmp/etcd" \
        --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "m0=http://127.0.0.1:$peer_port" --initial-cluster-state new \
        --initial-cluster-token "$name" --log-level error >"$tmp/etcd.log" 2>&1 &
    etcd_pid=$!
}

etcd_wait_healthy() {
    for _ in $(seq 300); do
        curl -sf "$etcd_url/health" 2>/dev/null | grep -q '"health":"true"' && return 0
        kill -0 "$etcd_pid" 2>/dev/null || break
        sleep 0.1
    done
    curl -sf "$etcd_url/health" 2>/dev/null | grep -q '"health":"true"'
}

etcd_stop() {
    if [ -n "$etcd_pid" ] && kill -0 "$etcd_pid" 2>/dev/null; then
        kill -TERM "$etcd_pid"
        for _ in $(seq 50); do kill -0 "$etcd_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$etcd_pid" 2>/dev/null
        wait "$etcd_pid" 2>/dev/null
    fi
}

# ---- the container
ct() {
    nsenter --target "$leader" --all -- /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive SYSTEMD_COLORS=0 SYSTEMD_PAGER= SYSTEMD_LOG_COLOR=0 "$@"
}
ct_up() { [ -n "$leader" ] && [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; }
prop() { ct systemctl show snowidd.service -p "$1" --value; }

# basic.target: none of the host's installed services (etcd, postgresql,
# nginx...) start in a container that shares the host's network.  On a host
# run by systemd, a scope with Delegate=yes gives the container's systemd a
# cgroup of its own (--keep-unit then uses that scope).
nspawn_boot() {
    local root=() wrap=()
    case "$1" in
    overlay)
        # systemd-nspawn's own --volatile=overlay refuses the host's root
        # directory, so the overlay is mounted here.  Both mounts live in a
        # mount namespace of their own, which goes when systemd-nspawn exits.
        mkdir "$tmp/overlay"
        root=(unshare --mount --propagation private -- sh -c '
            set -e
            ovl="$1"; shift
            mount -t tmpfs -o mode=0755 snowid-ct-upper "$ovl"
            mkdir "$ovl/upper" "$ovl/work" "$ovl/root"
            mount -t overlay -o "lowerdir=/,upperdir=$ovl/upper,workdir=$ovl/work" snowid-ct-root "$ovl/root"
            exec systemd-nspawn -D "$ovl/root" "$@"' sh "$tmp/overlay")
        ;;
    volatile) root=(systemd-nspawn -D / --volatile=yes) ;;
    *) echo "nspawn_boot: ROOT is overlay or volatile, not '$1'" >&2; return 2 ;;
    esac
    shift
    if [ -d /run/systemd/system ] && command -v systemd-run >/dev/null; then
        wrap=(systemd-run --scope --quiet --collect --unit="$name" -p Delegate=yes --)
    fi
    log "booting container $name"
    "${wrap[@]}" "${root[@]}" --register=no --keep-unit -b --machine="$name" --console=read-only \
        "$@" -- systemd.firstboot=off systemd.unit=basic.target \
        >"$tmp/console.log" 2>&1 </dev/null &
    nspawn_pid=$!
}

boot_failed() {
    echo "# ---- systemd-nspawn's output"
    tail -30 "$tmp/console.log" | sed 's/^/# /'
    on_boot_failure "$@"
    exit 1 # (on_boot_failure should not return)
}

nspawn_wait_boot() {
    local c deadline
    # the container's PID 1: nspawn's child once it has become systemd
    for _ in $(seq 300); do
        kill -0 "$nspawn_pid" 2>/dev/null || boot_failed "systemd-nspawn exited"
        for c in $(pgrep -P "$nspawn_pid"); do
            if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ] &&
                [ "$(readlink "/proc/$c/ns/pid")" != "$(readlink /proc/self/ns/pid)" ]; then
                leader=$c
            fi
        done
        [ -n "$leader" ] && break
        sleep 0.1
    done
    [ -n "$leader" ] || boot_failed "no systemd in the container after 30 s"
    # is-system-running --wait fails until PID 1 listens on its private socket
    ct_state=
    deadline=$((SECONDS + 60))
    while [ $SECONDS -lt $deadline ]; do
        kill -0 "$nspawn_pid" 2>/dev/null || boot_failed "the container stopped while booting"
        ct_state=$(ct timeout 30 systemctl is-system-running --wait 2>/dev/null)
        case "$ct_state" in running | degraded) return 0 ;; esac
        sleep 0.2
    done
    return 1
}

nspawn_halt() {
    if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
        # nspawn turns SIGTERM into SIGRTMIN+3 for the container's systemd: a clean halt
        kill -TERM "$nspawn_pid" 2>/dev/null
        for _ in $(seq 150); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$nspawn_pid" 2>/dev/null; then
            echo "# the container did not halt within 15 s: killing it"
            # the container's PID 1 first: that ends its whole PID namespace
            [ -n "$leader" ] && kill -KILL "$leader" 2>/dev/null
            kill -KILL "$nspawn_pid" 2>/dev/null
        fi
        wait "$nspawn_pid" 2>/dev/null
    fi
    # nspawn leaves this behind when /run is not a tmpfs (a host without systemd)
    rmdir "/run/systemd/nspawn/propagate/$name" 2>/dev/null
}

# shellcheck disable=SC2317 # (called by the EXIT trap)
cleanup() {
    local rc=$?
    set +e
    # a second Ctrl-C must not cut the cleanup short
    trap - EXIT
    trap '' INT TERM HUP
    if declare -F cleanup_inside >/dev/null; then cleanup_inside; fi
    nspawn_halt
    etcd_stop
    if { [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; } && [ -n "${SNOWID_KEEP:-}" ]; then
        echo "# files kept in $tmp"
    else
        rm -rf "$tmp"
    fi
    # stopped early (an error of the script itself, a signal) with every
    # check passed so far: that is a failure too (77 is a skip)
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ "$failed" -eq 0 ]; then
        notok "the script stopped early (exit $rc)"
    fi
    if declare -F cleanup_done >/dev/null; then cleanup_done; fi
    [ "$rc" -eq 0 ] && [ "$failed" -gt 0 ] && rc=1
    exit "$rc"
}
