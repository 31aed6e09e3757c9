#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The Debian packages, end to end: builds libsnowid1, libsnowid-dev, snowidd
# and snowid from debian/ with dpkg-buildpackage in a copy of the source tree
# (the work tree stays clean; the .debs land beside the copy), runs lintian on
# them (any error fails), then installs all four with apt-get in a container
# that boots this machine's own root under systemd (systemd-nspawn on an
# overlay: the host's tree read-only under a tmpfs, so the install never
# touches the host), and checks the result as an operator would meet it: the
# user snowid made by the package, the conffile, the unit where systemd looks
# for it and not enabled; then, with the store set in
# /etc/snowid/snowidd.conf, `systemctl enable --now snowidd`, an ID from the
# installed `snowid next` that the installed `snowid decode` takes apart, an
# ID from a C program built against libsnowid-dev with pkg-config, and
# `apt-get remove snowidd` stopping the daemon.
#
#   tests/package/test-deb.sh [SRCDIR]
#
# Needs root and Debian 12; installs what it needs with apt-get (dpkg-dev,
# debhelper, lintian, systemd-container, etcd, and debian/control's
# Build-Depends).  Starts its own etcd on 127.0.0.1 (free ports), which the
# container shares.  Takes about a minute and a half (a full build, lintian, a
# boot); scripts/test.sh runs it.  Prints "ok - ..." / "not ok -
# ..." per check and ends with "N passed, N failed"; exit 0 if all pass.
# SNOWID_KEEP=1 keeps the build directory (the .debs, the logs) of a failed
# run; SNOWID_KEEP_DEBS=DIR copies the four .debs to DIR.  The checks, the etcd and the container come from tests/lib/nspawn.sh,
# shared with tests/systemd/test-unit.sh.
set -uo pipefail

SRC=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
CT_DEBS=/snowid-debs               # where the .debs appear inside the container
t_start=$SECONDS
# log, ok, notok, check, give_up; etcd_*; nspawn_*, ct, prop, cleanup
# shellcheck source=tests/lib/nspawn.sh
. "$(dirname "$0")/../lib/nspawn.sh"

finish() { echo "$passed passed, $failed failed"; }

[ "$(id -u)" = 0 ] || { echo "# needs root (apt-get, systemd-nspawn)"; finish; exit 1; }
[ -f "$SRC/debian/control" ] || { echo "# no $SRC/debian/control"; finish; exit 1; }

tmp=$(mktemp -d /tmp/snowid-deb.XXXXXX)
name="snowid-deb$$-$RANDOM"        # the container's name (and hostname)
cluster="deb-$$-$RANDOM"           # keys under /snowid/<cluster>/ in the test's etcd

# called by boot_failed (after the console's last lines)
on_boot_failure() { give_up "the container booted: $*"; }
# called by cleanup: the container still up, then the last words
cleanup_inside() {
    if [ "$failed" -gt 0 ] && ct_up; then
        echo "# ---- journalctl -u snowidd (inside)"
        ct timeout 30 journalctl -u snowidd.service --no-pager 2>&1 | tail -40 | sed 's/^/# /'
    fi
}
cleanup_done() {
    echo "# $((SECONDS - t_start)) s"
    finish
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---- the tools, then debian/control's Build-Depends
export DEBIAN_FRONTEND=noninteractive
tools=(dpkg-dev debhelper lintian devscripts fakeroot systemd-container util-linux procps
    etcd-server curl python3 gcc pkg-config)
missing=()
for p in "${tools[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$tmp/apt.log" 2>&1 ||
        { tail -20 "$tmp/apt.log" | sed 's/^/# /'; give_up "apt-get install ${missing[*]}"; }
fi

# ---- build, in a copy of the source tree (scripts/build-debs.sh)
version=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
log "scripts/build-debs.sh: dpkg-buildpackage -us -uc -b"
mapfile -t debs < <(bash "$SRC/scripts/build-debs.sh" "$tmp" "$SRC" | tee "$tmp/build-debs.out" |
    grep -v '^#')
sed -n 's/^# /# build-debs: /p' "$tmp/build-debs.out"
check "four packages: $(cd "$tmp" && ls -- *.deb 2>/dev/null | paste -sd' ')" test ${#debs[@]} -eq 4
[ ${#debs[@]} -eq 4 ] || exit 1
# for the next test (the container images), if asked
if [ -n "${SNOWID_KEEP_DEBS:-}" ]; then
    mkdir -p "$SNOWID_KEEP_DEBS" && cp "${debs[@]}" "$SNOWID_KEEP_DEBS/"
fi
# what each holds, for the record
for f in "${debs[@]}"; do
    echo "# $(basename "$f"):"
    dpkg-deb -c "$f" | awk '$6 !~ /\/$/ { l = substr($6, 2); if ($7 == "->") l = l " -> " $8; print "#   " l }'
done
has() { dpkg-deb -c "$tmp/${1}_${version}_$arch.deb" | awk '{ print $6 }' | grep -qx "\./$2"; }
check "libsnowid1 holds libsnowid.so.1" has libsnowid1 "usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libsnowid.so.1"
check "libsnowid-dev holds snowid.h, snowid.pc and snowid_next(3)" eval \
    'has libsnowid-dev usr/include/snowid.h &&
     has libsnowid-dev "usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/pkgconfig/snowid.pc" &&
     has libsnowid-dev usr/share/man/man3/snowid_next.3.gz'
check "snowidd holds the daemon, the unit, the sysusers file, the config, snowidd(8) and snowidd.conf(5)" eval \
    'has snowidd usr/sbin/snowidd && has snowidd lib/systemd/system/snowidd.service &&
     has snowidd usr/lib/sysusers.d/snowid.conf && has snowidd etc/snowid/snowidd.conf &&
     has snowidd usr/share/man/man8/snowidd.8.gz && has snowidd usr/share/man/man5/snowidd.conf.5.gz &&
     has snowidd usr/share/doc/snowidd/operators.md'
check "snowid holds the command and snowid(1)" eval \
    'has snowid usr/bin/snowid && has snowid usr/share/man/man1/snowid.1.gz'

# ---- lintian: errors fail, warnings are listed
changes="$tmp/snowid_${version}_$arch.changes"
lintian --fail-on error --tag-display-limit 0 "$changes" >"$tmp/lintian.log" 2>&1
lintian_rc=$?
sed 's/^/# lintian: /' "$tmp/lintian.log"
errors=$(grep -c '^E:' "$tmp/lintian.log")
warnings=$(grep -c '^W:' "$tmp/lintian.log")
check "lintian $(basename "$changes"): exit $lintian_rc, $errors errors, $warnings warnings" \
    test "$lintian_rc" = 0 -a "$errors" = 0

# ---- etcd on loopback, started while the container boots
etcd_start

# ---- boot this machine's root in a container.  The root is an overlay: the
# host's whole tree (with its dpkg database and /etc) as the read-only lower
# layer, a tmpfs taking every write, so apt-get installs there and the host
# keeps nothing.
mkdir "$tmp/debs"
cp "${debs[@]}" "$tmp/debs/"
nspawn_boot overlay --bind-ro="$tmp/debs:$CT_DEBS"
nspawn_wait_boot
case "$ct_state" in
running | degraded) ok "the container booted: $ct_state (pid 1 is host pid $leader)" ;;
*) boot_failed "state '${ct_state:-unknown}'" ;;
esac
ct systemctl --failed --no-legend --plain --no-pager | sed 's/^/# failed unit in the container: /'

# ---- install the four packages
ct getent passwd snowid >/dev/null && give_up "the container has no user snowid before the install"
# A container image's policy-rc.d (exit 101: "no service actions") would
# keep the maintainer scripts from starting and stopping the unit; a real
# machine has none (only the overlay loses it)
ct rm -f /usr/sbin/policy-rc.d
ct_debs=()
for f in "${debs[@]}"; do ct_debs+=("$CT_DEBS/$(basename "$f")"); done
if ct apt-get install -y --no-install-recommends "${ct_debs[@]}" \
    >"$tmp/install.log" 2>&1; then
    ok "apt-get install -y $CT_DEBS/*.deb in the container"
else
    tail -30 "$tmp/install.log" | sed 's/^/# /'
    give_up "apt-get install -y $CT_DEBS/*.deb in the container"
fi
status=$(ct dpkg-query -W -f='${Package}=${Status} ' libsnowid1 libsnowid-dev snowidd snowid 2>&1)
check "all four are installed: $status" \
    test "$(echo "$status" | grep -o '=install ok installed' | wc -l)" = 4
check "snowidd's postinst made user and group snowid ($(ct id snowid 2>&1))" \
    eval 'ct getent passwd snowid >/dev/null && ct getent group snowid >/dev/null'
conffiles=$(ct dpkg-query -W -f='${Conffiles}' snowidd)
check "/etc/snowid/snowidd.conf is a conffile of snowidd" \
    grep -q '^ */etc/snowid/snowidd.conf ' <<<"$conffiles"
fragment=$(prop FragmentPath) execstart=$(prop ExecStart) enabled=$(prop UnitFileState)
check "systemd knows the unit from $fragment, not enabled ($enabled)" \
    test "$fragment" = /lib/systemd/system/snowidd.service -a "$enabled" = disabled
check "the unit runs /usr/sbin/snowidd: $(grep -o 'path=[^ ;]*' <<<"$execstart")" \
    grep -q 'path=/usr/sbin/snowidd ' <<<"$execstart"
check "the install did not start it (not configured yet): $(prop ActiveState)" \
    test "$(prop ActiveState)" = inactive

# ---- configure the store as an operator would, then enable and start
ct sed -i -e "s|^etcd = .*|etcd = $etcd_url|" -e "s|^cluster = .*|cluster = $cluster|" \
    -e "s|^http = .*|http = 127.0.0.1:$http_port|" /etc/snowid/snowidd.conf
out=$(ct /usr/sbin/snowidd --check-config 2>&1)
check "snowidd --check-config accepts the edited /etc/snowid/snowidd.conf: $out" test $? = 0
etcd_wait_healthy ||
    { tail -20 "$tmp/etcd.log" | sed 's/^/# /'; give_up "etcd on $etcd_url is healthy"; }
if out=$(ct timeout 60 systemctl enable --now snowidd.service 2>&1); then
    ok "systemctl enable --now snowidd"
else
    notok "systemctl enable --now snowidd: $out"
    ct systemctl status snowidd.service --no-pager -l 2>&1 | sed 's/^/# /'
    exit 1
fi
check "the unit is active/running: $(prop ActiveState)/$(prop SubState), '$(prop StatusText)'" \
    test "$(prop ActiveState)/$(prop SubState)" = active/running

# ---- IDs from the installed command and library
id=$(ct snowid next 2>"$tmp/next.err")
check "the installed snowid next printed an ID: '$id'$(sed 's/^/ /' "$tmp/next.err")" \
    eval '[[ "$id" =~ ^[0-9]+$ ]] && [ "$id" -gt 0 ]'
worker=$(ct snowid status 2>&1 | sed -n 's/^worker: *\([0-9]*\).*/\1/p')
decoded=$(ct snowid decode "$id" 2>&1)
decoded_ms=$(sed -n 's/.*unix_ms=\([0-9]*\).*/\1/p' <<<"$decoded")
decoded_worker=$(sed -n 's/.*worker=\([0-9]*\).*/\1/p' <<<"$decoded")
now_ms=$(python3 -c 'import time; print(int(time.time() * 1000))')
# a new cluster claims above the clock bound a fence does (docs/fences.md):
# its first IDs are up to 60 s + window + mark-step (75 s) ahead of the clock
check "snowid decode $id: worker $decoded_worker (snowid status: ${worker:-?}), $((now_ms - ${decoded_ms:-0})) ms ago: $decoded" \
    eval '[ -n "$worker" ] && [ "$decoded_worker" = "$worker" ] && [ -n "$decoded_ms" ] &&
          [ $((decoded_ms - now_ms)) -le 76000 ] && [ $((now_ms - decoded_ms)) -lt 60000 ]'
# a C program built against the installed libsnowid-dev, as its users build theirs
# (a directory of its own inside the container, whatever the image holds)
udir=$(ct mktemp -d)
ct tee "$udir/take.c" >/dev/null <<'EOF'
#include <inttypes.h>
#include <stdio.h>
#include <snowid.h>

int main(void)
{
        snowid *s;
        uint64_t id;
        snowid_status st = SNOWID_STATUS_INIT;
        int r = snowid_open(NULL, &s);
        if (r < 0 || (r = snowid_next(s, &id)) < 0 || (r = snowid_get_status(s, &st)) < 0) {
                fprintf(stderr, "take: %d\n", r);
                return 1;
        }
        printf("%" PRIu64 " %" PRIu32 "\n", id, st.worker);
        snowid_close(s);
        return 0;
}
EOF
if out=$(ct sh -c 'cd "$1" && cc -Wall -Werror -o take take.c $(pkg-config --cflags --libs snowid) 2>&1 &&
        ./take' sh "$udir" 2>&1) && [[ "$out" =~ ^[0-9]+\ [0-9]+$ ]]; then
    read -r out out_worker <<<"$out"
    lib=$(ct ldd "$udir/take" | sed -n 's/.*libsnowid.so.1 => \([^ ]*\).*/\1/p')
    owner=$(ct dpkg-query -S "$(ct realpath "$lib")" 2>&1 | cut -d: -f1)
    ok "a program built with pkg-config snowid ($(ct pkg-config --modversion snowid)) took ID $out"
    check "it runs with $lib, from package ${owner:-?}" test "$owner" = libsnowid1
    check "its ID follows the command's ($out > $id)" test "$out" -gt "$id"
    check "its snowid_get_status (SNOWID_1.2) says worker $out_worker, as snowid status does" \
        test "$out_worker" = "${worker:-?}"
else
    notok "a program built against libsnowid-dev with pkg-config took an ID: $out"
fi

# ---- remove the daemon's package: prerm stops it
if out=$(ct apt-get remove -y snowidd 2>&1); then
    active=$(prop ActiveState) load=$(prop LoadState)
    check "apt-get remove snowidd stopped the daemon ($active) and took its unit (LoadState=$load)" \
        test "$active" = inactive -a "$load" != loaded
    check "the edited conffile stays until a purge" \
        ct grep -qx "cluster = $cluster" /etc/snowid/snowidd.conf
else
    notok "apt-get remove -y snowidd: $(tail -5 <<<"$out")"
fi
