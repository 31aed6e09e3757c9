#!/usr/bin/env bash
# Runs the README's two commands on a bare Debian 12 root, as a new user
# would on a fresh machine: proof that scripts/deps.sh installs everything
# the quick start and the tests need, and nothing is taken from this
# machine's own packages.  Run it before changing deps.sh.
#
#   scripts/fresh-check.sh [--rev REV] [--run-only] [--keep] [--dir DIR] [--mirror M]...
#
# - mmdebstrap makes a minbase root of bookworm (Essential packages and apt:
#   no compiler, no python, no git) under DIR (default a new directory
#   that mktemp makes in $TMPDIR: a root and its packages take a few GB), from
#   mmdebstrap's default mirror (Debian's, with updates and security) or
#   each --mirror given (a URL or a sources.list line, as mmdebstrap takes);
# - a clean clone of REV (default HEAD) of this repository goes into the
#   snowid/ in the new root's home of root (a 0700 directory, as Debian
#   makes it), without the work tree's changes;
# - inside the root (made the root of a mount and PID namespace of its own
#   with pivot_root, with /proc, /sys, /dev, an empty /run and the host's
#   network: what root has on a machine),
#   `scripts/run.sh` runs until it has printed IDs and is stopped with
#   Ctrl-C's SIGINT, then `scripts/test.sh` runs to its end (unless
#   --run-only).
#
# Prints each step's time and the last lines of each command's output; exit
# 0 if both commands passed.  The root is removed at the end unless --keep.
# Needs root and a reachable Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
# root's home inside the bootstrapped root, as Debian makes it (not this
# machine's): the clone, and the logs of the two commands, go there
home=/root

rev=HEAD run_only=0 keep=0 dir= mirrors=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rev) rev=$2; shift ;;
        --run-only) run_only=1 ;;
        --keep) keep=1 ;;
        --dir) dir=$2; shift ;;
        --mirror) mirrors+=("$2"); shift ;;
        *) echo "usage: scripts/fresh-check.sh [--rev REV] [--run-only] [--keep] [--dir DIR] [--mirror M]..." >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "fresh-check: needs root (mmdebstrap, pivot_root)" >&2; exit 1; }
for tool in mmdebstrap unshare git; do
    command -v "$tool" >/dev/null || { echo "fresh-check: no $tool (apt-get install mmdebstrap util-linux git)" >&2; exit 1; }
done
commit=$(git rev-parse --verify "$rev^{commit}")

if [ -z "$dir" ]; then
    dir=$(mktemp -d -t snowid-fresh.XXXXXX)
else
    [ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] || { echo "fresh-check: $dir is not empty" >&2; exit 1; }
    mkdir -p "$dir"
fi
root=$dir/root
started=$SECONDS
step() { printf '== %s (at %d s)\n' "$1" $((SECONDS - started)); }
cleanup() {
    # a mount left by a command killed inside is gone with its namespace
    if [ "$keep" = 1 ]; then
        echo "fresh-check: the root is kept in $root"
    else
        rm -rf --one-file-system "$dir"
    fi
}
trap cleanup EXIT

step "mmdebstrap: a minbase Debian 12 root in $root"
mmdebstrap --quiet --variant=minbase --mode=root bookworm "$root" "${mirrors[@]}"
# the resolver, as a machine's installer leaves it
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

step "a clean clone of $commit in $home/snowid (0700)"
git clone --quiet --no-checkout "$src" "$root$home/snowid"
git -C "$root$home/snowid" checkout --quiet "$commit"
chmod 700 "$root$home" "$root$home/snowid"

# what runs inside: the first command until its IDs are printed, then
# SIGINT, as Ctrl-C; then the second to its end
inside=$(cat <<'EOF'
set -uo pipefail
cd "$HOME/snowid"
echo "== scripts/run.sh"
t0=$SECONDS
# job control: run.sh in a process group of its own, with SIGINT as a
# terminal leaves it (a background job of a script would ignore it), so
# that the group's SIGINT below is Ctrl-C's
set -m
scripts/run.sh >"$HOME/run.log" 2>&1 &
pid=$!
set +m
ran=0
for _ in $(seq 1800); do   # the install and build come first: up to 15 min
    grep -q "^Running; try" "$HOME/run.log" && { ran=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
done
kill -INT -- "-$pid" 2>/dev/null
wait "$pid"
rc=$?
tail -n 25 "$HOME/run.log"
ids=$(sed -n '/^\$ snowid next -n 5$/,/^$/p' "$HOME/run.log" | grep -cE '^[0-9]+$')
echo "run.sh: $((SECONDS - t0)) s, printed IDs: $ids, exit after SIGINT: $rc"
[ "$ran" = 1 ] && [ "$ids" = 5 ] || { echo "fresh-check: scripts/run.sh did not print its IDs" >&2; exit 1; }
[ "${RUN_ONLY:-0}" = 1 ] && exit 0
echo "== scripts/test.sh"
t0=$SECONDS
scripts/test.sh >"$HOME/test.log" 2>&1
rc=$?
tail -n 40 "$HOME/test.log"
echo "test.sh: $((SECONDS - t0)) s, exit $rc"
exit "$rc"
EOF
)

step "inside the root: the README's two commands"
rc=0
RUN_ONLY=$run_only unshare --mount --pid --fork --kill-child -- bash -c '
    set -e
    root=$1
    mount --make-rprivate /
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=755 tmpfs "$root/run"
    # the root a mount point, as on a machine (not a chroot): unshare, ip
    # netns and systemd-nspawn change its propagation
    cd "$root"
    pivot_root . .
    umount -l .
    cd /
    exec /usr/bin/env -i HOME="$3" LANG=C.UTF-8 TERM=dumb RUN_ONLY="$RUN_ONLY" \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash -c "$2"
' _ "$root" "$inside" "$home" || rc=$?
step "done, exit $rc"
if [ "$rc" != 0 ] && [ "$keep" = 0 ]; then
    mkdir -p logs
    for f in run test; do
        [ -f "$root$home/$f.log" ] && cp "$root$home/$f.log" "logs/fresh-$f.log" && echo "fresh-check: logs/fresh-$f.log"
    done
fi
exit "$rc"
