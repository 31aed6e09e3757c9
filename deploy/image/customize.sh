#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What deploy/image/build.sh adds to an image's root once mmdebstrap has
# unpacked the packages into it (with their .debs kept in apt's cache).
#
#   customize.sh ROOT daemon|client
#
# The accounts (daemon: snowid, uid and gid 10990; client: snowid-client,
# uid 10991, a member of the group snowid), a dpkg status built from the
# packages' own control files (--variant=extract installs nothing, so dpkg's
# would be empty, and scanners read it), /run/snowid and /tmp, and no
# documentation but the copyright files, no locales, no iconv modules, no
# apt or dpkg configuration or cache, nothing of the build machine's (its
# resolv.conf, its hostname) and no device nodes.
set -euo pipefail
# the same files whatever the caller's umask and locale
umask 022
export LC_ALL=C
root=${1:?} users=${2:?}

echo "root:x:0:0:root:/root:/usr/sbin/nologin" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"
case "$users" in
daemon)
    echo "snowid:x:10990:10990:snowid daemon:/nonexistent:/usr/sbin/nologin" >>"$root/etc/passwd"
    echo "snowid:x:10990:" >>"$root/etc/group"
    ;;
client)
    echo "snowid-client:x:10991:10991:snowid client:/nonexistent:/usr/sbin/nologin" \
        >>"$root/etc/passwd"
    printf '%s\n' "snowid:x:10990:snowid-client" "snowid-client:x:10991:" >>"$root/etc/group"
    ;;
*) echo "customize.sh: daemon or client, not '$users'" >&2; exit 2 ;;
esac
printf '%s\n' "passwd: files" "group: files" "hosts: files dns" >"$root/etc/nsswitch.conf"
mkdir -p "$root/var/lib/dpkg" "$root/run/snowid" "$root/tmp"
chmod 1777 "$root/tmp"

debs=("$root"/var/cache/apt/archives/*.deb)
[ -f "${debs[0]}" ] || { echo "customize.sh: no packages in $root/var/cache/apt/archives" >&2; exit 1; }
: >"$root/var/lib/dpkg/status"
for deb in "${debs[@]}"; do
    { dpkg-deb -f "$deb" | grep -v '^$'; echo "Status: install ok installed"; echo; } \
        >>"$root/var/lib/dpkg/status"
done

rm -f "${debs[@]}"
find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/{man,info,locale,lintian,bug,common-licenses,perl5,bash-completion} \
    "$root"/usr/lib/*-linux-gnu/gconv "$root"/etc/{apt,dpkg,cron.daily,logrotate.d} \
    "$root"/var/lib/apt "$root"/var/cache/apt "$root"/var/log/*
# the container runtime provides these; mmdebstrap's copies are the build
# machine's (its resolver, its name) or device nodes
rm -rf "$root"/etc/{resolv.conf,hostname,fstab} "$root"/dev/*
