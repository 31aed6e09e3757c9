#!/usr/bin/env bash
# Installs what snowid needs to build and run (Debian 12, as root); with
# --test, also what the tests need beyond that (the fuzzers' clang, the chaos
# test's numpy, PostgreSQL, promtool, groff to render the man pages); with
# --postgres, a PostgreSQL server to use as the store.  Quiet when everything
# is already there.
set -euo pipefail

packages=(
    meson ninja-build pkg-config gcc g++ python3
    libcmocka-dev liburcu-dev libsystemd-dev libcurl4-openssl-dev libjansson-dev libmicrohttpd-dev
    libpq-dev
    scdoc   # the man pages (man/*.scd)
    etcd-server etcd-client faketime libfaketime curl jq systemd iproute2 procps spin time
    util-linux   # chrt: the model check runs beside the tests at idle priority
)
if [ "${1:-}" = --test ] || [ "${1:-}" = --postgres ]; then
    packages+=(postgresql-15 postgresql-client-15)
fi
if [ "${1:-}" = --test ]; then
    packages+=(python3-numpy clang llvm libclang-rt-14-dev)
    packages+=(systemd-container)   # systemd-nspawn: tests/systemd/test-unit.sh
    packages+=(prometheus)          # promtool: contrib/prometheus's rules, /metrics checked
    packages+=(groff-base)          # troff: the man-pages test renders every page
    packages+=(clang-format)        # scripts/format.sh --check
    # tests/package/test-deb.sh: the packages built, linted and installed
    packages+=(dpkg-dev debhelper lintian fakeroot)
    # deploy/image/build.sh and tests/kubernetes/: the images built, the
    # manifests checked against the API's schema and played with podman
    packages+=(mmdebstrap buildah podman runc slirp4netns python3-kubernetes python3-yaml)
    # podman's pause container runs its catatonit (only Recommended by
    # podman, and recommendations are not installed here)
    packages+=(catatonit)
    # the clients in other languages: each folder lists its Debian packages,
    # one a line; "PKG unless PATH": not needed where PATH exists (a Node.js
    # installed from elsewhere, with its own headers)
    for f in "$(dirname "$0")"/../bindings/*/debian-packages; do
        [ -f "$f" ] || continue
        while read -r pkg unless path _; do
            [ -n "$pkg" ] || continue
            [ "$unless" = unless ] && [ -e "$path" ] && continue
            packages+=("$pkg")
        done < <(sed 's/#.*//' "$f")
    done
fi
# the HTTP tests run a JavaScript client: any Node.js with fetch (18 or later)
command -v node >/dev/null 2>&1 || packages+=(nodejs)

# What the quick start and the tests run, from the packages above: checked
# once they are installed, so that a command no package brings (a package
# that only recommends it, a test that needs something nobody installs)
# stops the run here, named, rather than a test failing or skipping itself
# half an hour in.  A path is a file that must exist; "py:MODULE" a module
# Debian's python3 must import.
needs=(meson ninja pkg-config gcc g++ python3 scdoc etcd etcdctl faketime curl jq ip pgrep
    spin chrt /usr/bin/time node)
if [ "${1:-}" = --test ] || [ "${1:-}" = --postgres ]; then
    needs+=(/usr/lib/postgresql/15/bin/postgres /usr/lib/postgresql/15/bin/initdb
        /usr/lib/postgresql/15/bin/pg_isready psql runuser setpriv)
fi
if [ "${1:-}" = --test ]; then
    needs+=(py:numpy clang llvm-symbolizer systemd-nspawn nsenter unshare promtool troff
        clang-format dpkg-buildpackage dh lintian fakeroot mmdebstrap buildah podman runc
        slirp4netns catatonit py:kubernetes py:yaml
        go gofmt javac java jar /usr/share/java/junit-platform-console-standalone.jar npm
        py:pytest py:ensurepip py:mesonpy cargo rustc rustdoc)
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "deps: missing ${missing[*]}; run as root to install them" >&2
        exit 1
    fi
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
absent=()
for n in "${needs[@]}"; do
    case "$n" in
        py:*) /usr/bin/python3 -c "import ${n#py:}" 2>/dev/null || absent+=("$n") ;;
        /*) [ -e "$n" ] || absent+=("$n") ;;
        *) command -v "$n" >/dev/null 2>&1 || absent+=("$n") ;;
    esac
done
if [ ${#absent[@]} -gt 0 ]; then
    echo "deps: still missing after the install: ${absent[*]} (scripts/deps.sh installs no package that brings it)" >&2
    exit 1
fi
