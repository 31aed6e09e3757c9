#!/usr/bin/env bash
# The unit passes systemd-analyze verify, and its exposure stays low.
set -euo pipefail
build="$1" src="$2"
command -v systemd-analyze >/dev/null || { echo "no systemd-analyze: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the unit as meson generated it (systemd/snowidd.service.in); verify wants
# ExecStart's binary to exist: point it at the build
[ -f "$build/systemd/snowidd.service" ] || { echo "no $build/systemd/snowidd.service"; exit 1; }
sed "s|^ExecStart=[^ ]*|ExecStart=$build/daemon/snowidd|" "$build/systemd/snowidd.service" \
    >"$tmp/snowidd.service"
# (--man=no: its man: pages are in the build, not installed where man looks)
systemd-analyze verify --man=no "$tmp/snowidd.service"
exposure=$(systemd-analyze security --offline=yes "$tmp/snowidd.service" 2>/dev/null |
    sed -n 's/.*Overall exposure level for snowidd.service: \([0-9.]*\).*/\1/p')
echo "exposure: $exposure"
[ -n "$exposure" ] && python3 -c "import sys; sys.exit(0 if float('$exposure') <= 2.0 else 1)"
