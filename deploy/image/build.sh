#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds the two OCI images of snowid from this repository's Debian
# packages, on a Debian 12 root made from Debian's packages alone (no base
# image, no container registry):
#
#   snowid/snowidd:VERSION  snowidd, the snowid command and the libraries
#                           they link; runs as snowid (uid and gid 10990)
#   snowid/snowid:VERSION   the snowid command and libsnowid; runs as
#                           snowid-client (uid 10991), a member of the
#                           group snowid (10990), so it may take IDs
#
# Neither has a shell, a package manager or anything else a process there
# does not need.  Each is one layer: the packages and their dependencies as
# `mmdebstrap --variant=extract` unpacks them (no maintainer script runs),
# then /etc/passwd and /etc/group, a dpkg status that lists every package in
# it (for scanners), and no documentation but the copyright files.
#
#   deploy/image/build.sh [--debs DIR] [--out DIR] [--mirror URL]
#                         [--security-mirror URL] [--source URL] [--load]
#
#   --debs DIR      the four .debs (scripts/build-debs.sh); built if not given
#   --out DIR       where the images go (default build-image/): snowidd.oci.tar
#                   and snowid.oci.tar (OCI archives), and images.txt (their
#                   names, digests and sizes)
#   --mirror URL    Debian's archive, bookworm and bookworm-updates (default
#                   http://deb.debian.org/debian).  A mirror on the local
#                   network, or copy:///PATH for one on disk, with
#                   --security-mirror none (or one of its own), builds offline
#   --security-mirror URL   its security archive (default
#                   http://deb.debian.org/debian-security; "none" to leave out)
#   --source URL    the source repository, for the images' source label
#                   (default: git's remote origin, if it is a URL)
#   --load          also load both into this machine's podman (podman load)
#
# Needs root on Debian 12; installs mmdebstrap, buildah and dpkg-dev with
# apt-get.  The build is reproducible: given the same packages (the same
# .debs, and a mirror in the same state), a build gives the same digests.
# File times and the images' creation time come from debian/changelog's
# date; the revision label is git's HEAD, "-dirty" when tracked files differ.
set -uo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
debs='' out="$SRC/build-image" load=0
# (without a user or token a URL may carry)
source=$(git -C "$SRC" remote get-url origin 2>/dev/null | grep -E '^(https?|git|ssh)://' |
    sed -E 's#^([a-z+]+://)[^@/]*@#\1#' || true)
mirror=http://deb.debian.org/debian security=http://deb.debian.org/debian-security
usage() { sed -n 's/^# \{0,1\}//; 3,/^set /p' "$0" | sed '$d'; }
while [ $# -gt 0 ]; do
    case "$1" in
    --debs) debs=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --mirror) mirror=${2:?}; shift 2 ;;
    --security-mirror) security=${2:?}; shift 2 ;;
    --source) source=${2:?}; shift 2 ;;
    --load) load=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
say() { echo "# [$(date +%T)] $*"; }
umask 022
export LC_ALL=C
die() { echo "build.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap --mode=root, buildah)"

export DEBIAN_FRONTEND=noninteractive
missing=()
for p in mmdebstrap buildah dpkg-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install ${missing[*]} failed"
fi

version=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
upstream=${version%-*}
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Timestamp)
export SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
revision=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)
# a tree with changes git tracks is not that commit
[ -n "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ] && revision+=-dirty
arch=$(dpkg-architecture -qDEB_HOST_ARCH)

mkdir -p "$out" && out=$(cd "$out" && pwd) || die "cannot make $out"
work=$(mktemp -d /tmp/snowid-image.XXXXXX)
storage="$work/storage"
bah() { buildah --root "$storage/root" --runroot "$storage/run" --storage-driver vfs "$@"; }
cleanup() {
    bah rm --all >/dev/null 2>&1
    # whatever a killed mmdebstrap left mounted stays out of the removal
    grep -o " $work/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
t_start=$SECONDS

# ---- the packages: given, or built
if [ -z "$debs" ]; then
    say "building the packages (scripts/build-debs.sh)"
    bash "$SRC/scripts/build-debs.sh" "$work/debs" "$SRC" >"$work/build-debs.out" ||
        { cat "$work/build-debs.out" >&2; die "building the packages failed"; }
    debs="$work/debs"
fi
# a flat repository of the project's four, which apt resolves beside Debian's
mkdir "$work/repo"
for p in libsnowid1 snowidd snowid; do
    f="$debs/${p}_${version}_$arch.deb"
    [ -f "$f" ] || die "no $f (version $version, from debian/changelog)"
    cp "$f" "$work/repo/"
done
(cd "$work/repo" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null) ||
    die "dpkg-scanpackages failed"

sources=("deb $mirror bookworm main" "deb $mirror bookworm-updates main")
[ "$security" = none ] || sources+=("deb $security bookworm-security main")
# copy://: mmdebstrap copies the files in, where apt inside can read them
sources+=("deb [trusted=yes] copy://$work/repo ./")

# root NAME USERS PACKAGE...: NAME.tar, a root with the packages and what
# deploy/image/customize.sh adds (--variant=extract runs no hooks of its own
# after the unpacking, so it runs here, on the directory)
root() {
    local name="$1" users="$2"; shift 2
    local inc dir="$work/$name"
    inc=$(
        IFS=,
        echo "$*"
    )
    say "$name: mmdebstrap --variant=extract --include=$inc"
    # the downloaded packages stay, for the dpkg status customize.sh writes
    # (nothing runs in the root, so nothing of the host is mounted there)
    if ! mmdebstrap --variant=extract --mode=root --format=directory --skip=cleanup/apt/cache \
        --skip=chroot/mount \
        --include="$inc" bookworm "$dir" "${sources[@]}" >"$work/$name.mmdebstrap.log" 2>&1; then
        grep -E '^(E|W):' "$work/$name.mmdebstrap.log" >&2
        die "mmdebstrap for $name failed (log: $work/$name.mmdebstrap.log)"
    fi
    bash "$SRC/deploy/image/customize.sh" "$dir" "$users" || die "customize.sh $name failed"
    tar -C "$dir" --sort=name --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime \
        --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
        -cf "$work/$name.tar" . || die "tar of $name failed"
}
# snowidd's package needs a sysusers (for its postinst, which does not run
# here): the standalone one, not all of systemd
root snowidd daemon snowidd snowid systemd-standalone-sysusers
root snowid client snowid

# image NAME TITLE DESCRIPTION USER ENTRYPOINT CMD: the OCI archive NAME.oci.tar
image() {
    local name="$1" title="$2" description="$3" user="$4" entrypoint="$5" cmd="$6" c
    c=$(bah from --quiet scratch) || die "buildah from scratch failed"
    bah add --quiet "$c" "$work/$name.tar" / || die "buildah add failed"
    local ann=(
        "org.opencontainers.image.title=$title"
        "org.opencontainers.image.description=$description"
        "org.opencontainers.image.version=$upstream"
        "org.opencontainers.image.revision=$revision"
        "org.opencontainers.image.created=$created"
        "org.opencontainers.image.licenses=MIT"
        "org.opencontainers.image.vendor=snowid"
        "org.opencontainers.image.base.name=debian:bookworm (mmdebstrap --variant=extract)"
    )
    [ -n "$source" ] && ann+=("org.opencontainers.image.source=$source")
    local args=() a
    for a in "${ann[@]}"; do args+=(--label "$a" --annotation "$a"); done
    bah config "${args[@]}" --user "$user" --entrypoint "$entrypoint" --cmd "$cmd" \
        --env PATH=/usr/sbin:/usr/bin:/sbin:/bin --workingdir / --stop-signal SIGTERM \
        --os linux --arch "$arch" "$c" || die "buildah config failed"
    rm -f "$out/$name.oci.tar"
    bah commit --quiet --format oci --disable-compression=false --timestamp "$SOURCE_DATE_EPOCH" --rm "$c" \
        "oci-archive:$out/$name.oci.tar:snowid/$name:$upstream" >/dev/null ||
        die "buildah commit $name failed"
}
image snowidd "snowidd" "snowid's per-host daemon: leases a worker number, serves the segment" \
    10990:10990 '["/usr/sbin/snowidd"]' '["--config", "/etc/snowid/snowidd.conf"]'
image snowid "snowid" "the snowid command and libsnowid: take and decode snowid IDs" \
    10991:10991 '["/usr/bin/snowid"]' '["status"]'

{
    echo "# snowid images, version $upstream, built from $revision"
    for name in snowidd snowid; do
        printf 'snowid/%s:%s\t%s\tcompressed %s bytes\tunpacked %s bytes\n' "$name" "$upstream" \
            "$(tar -xOf "$out/$name.oci.tar" index.json | grep -o 'sha256:[0-9a-f]*' | head -1)" "$(stat -c %s "$out/$name.oci.tar")" \
            "$(tar -tvf "$work/$name.tar" | awk '{ s += $3 } END { print s }')"
    done
} >"$out/images.txt"
sed 's/^/# /' "$out/images.txt"
if [ "$load" = 1 ]; then
    for name in snowidd snowid; do
        podman load -q -i "$out/$name.oci.tar" || die "podman load $name failed"
    done
fi
say "built in $((SECONDS - t_start)) s: $out/snowidd.oci.tar, $out/snowid.oci.tar"
