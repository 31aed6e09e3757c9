#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds the four Debian packages (libsnowid1, libsnowid-dev, snowidd,
# snowid) from debian/ with dpkg-buildpackage, in a copy of the source tree
# (the work tree stays clean), and leaves them in OUTDIR with the .changes
# file and the build's log.
#
#   scripts/build-debs.sh OUTDIR [SRCDIR]
#
# Needs root on Debian 12: installs dpkg-dev, debhelper and debian/control's
# Build-Depends with apt-get.  Prints "# ..." lines as it goes and, last, the
# four .deb paths, one a line; what a failed step printed goes to stderr.  Exit 0 if all four were built.  Used by
# tests/package/test-deb.sh and deploy/image/build.sh.
set -uo pipefail

out=${1:?usage: scripts/build-debs.sh OUTDIR [SRCDIR]}
SRC=$(cd "${2:-$(dirname "$0")/..}" && pwd)
say() { echo "# $*"; }
die() { say "$*"; echo "build-debs.sh: $*" >&2; exit 1; }

mkdir -p "$out" && out=$(cd "$out" && pwd) || die "cannot make $out"
[ -f "$SRC/debian/control" ] || die "no $SRC/debian/control"
export DEBIAN_FRONTEND=noninteractive
missing=()
for p in dpkg-dev debhelper fakeroot; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        >"$out/apt.log" 2>&1 || { tail -20 "$out/apt.log" >&2; die "apt-get install ${missing[*]}"; }
fi

# what git tracks plus new files it does not ignore (the work tree as it
# is, without build directories), in OUTDIR/snowid-VERSION
version=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
copy="$out/snowid-${version%-*}"
rm -rf "$copy" && mkdir "$copy" || die "cannot make $copy"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
        tar -c --null -T - -f -) | tar -x -C "$copy"
else
    tar -C "$SRC" -c --exclude='./build*' --exclude=./.git -f - . | tar -x -C "$copy"
fi
[ -f "$copy/debian/rules" ] || die "copying the source tree to $copy failed"
say "copied the source tree ($(find "$copy" -type f | wc -l) files) to $copy"

if ! (cd "$copy" && apt-get build-dep -y -qq ./) >"$out/build-dep.log" 2>&1; then
    # an old package list: refresh it once
    apt-get update -qq && (cd "$copy" && apt-get build-dep -y -qq ./) >"$out/build-dep.log" 2>&1 ||
        { tail -20 "$out/build-dep.log" >&2; die "apt-get build-dep ./ failed"; }
fi

t0=$SECONDS
if ! (cd "$copy" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b) \
    >"$out/build.log" 2>&1; then
    grep -E 'error|warning|dpkg-gensymbols|dh_missing' "$out/build.log" | tail -40 >&2
    tail -20 "$out/build.log" >&2
    die "dpkg-buildpackage -us -uc -b failed (log: $out/build.log)"
fi
say "dpkg-buildpackage -us -uc -b built the packages in $((SECONDS - t0)) s"
rm -rf "$copy"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
rc=0
for p in libsnowid1 libsnowid-dev snowidd snowid; do
    f="$out/${p}_${version}_$arch.deb"
    if [ -f "$f" ]; then echo "$f"; else say "$p's .deb is missing: $f"; rc=1; fi
done
exit $rc
