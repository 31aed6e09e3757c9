#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""readme-paths.py: each binding's README, followed as a new user would.

libsnowid is installed from the build ($SNOWID_BUILD, default ./build) with
`meson install --destdir` into a temporary directory and its snowid.pc
pointed at where it landed, so the library sits under a prefix that neither
pkg-config nor the dynamic loader searches by themselves.  Then, for each
language whose toolchain is installed, a small program is built outside the
source tree, from a copy of bindings/, with the very commands its README
gives (the README must still contain each of them, whitespace aside: a
README edited away from these commands fails this test), and run against a
real etcd and snowidd (tests/integration/harness.py).  The IDs it prints
must be nonzero, below 2^63, strictly increasing, carry the worker that
`snowid status` shows, and a time within a minute before now, or ahead of it
by at most the lead a new cluster's first claims have (60 s + window +
mark-step, docs/fences.md).

Offline throughout: GOPROXY=off (with go's default -mod=readonly), pip
without an index, npm --offline, cargo offline.  A language whose
toolchain is missing is skipped; exit 77 when every one is, 1 when any
fails."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import BUILD, EPOCH_MS, Daemon, Etcd, Harness, cli_status, log  # noqa: E402

BUILD = os.path.abspath(BUILD)
N = 5   # IDs each program prints


class Skip(Exception):
    pass


def readme(path):
    with open(os.path.join(ROOT, path)) as f:
        return " ".join(f.read().split())


def documented(path, text):
    """Asserts that the README at path (from the root) says text, whitespace
    runs counting as one space; returns text."""
    if " ".join(text.split()) not in readme(path):
        raise AssertionError(f"{path} no longer says: {text}")
    return text


def sh(cmd, cwd, env, timeout=240):
    """Runs a documented command line with sh, as a user would type it."""
    log(f"$ {cmd}")
    r = subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"`{cmd}` exited {r.returncode}:\n{r.stdout[-4000:]}")
    return r.stdout


def run(argv, cwd, env, timeout=120):
    r = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}:\n{r.stdout[-4000:]}")
    return r.stdout


def need(*progs):
    for p in progs:
        if shutil.which(p) is None:
            raise Skip(f"{p} is not installed")


def check_ids(out, worker):
    ids = [int(x) for x in re.findall(r"^\d+$", out, re.M)]
    assert len(ids) >= N, f"expected {N} IDs, got:\n{out}"
    now = time.time() * 1000
    for a, b in zip(ids, ids[1:]):
        assert b > a, f"IDs not increasing: {a} then {b}"
    for i in ids:
        assert 0 < i < 1 << 63, f"ID {i} out of range"
        w = (i >> 12) & 1023
        t = EPOCH_MS + (i >> 22)
        assert w == worker, f"ID {i}: worker {w}, snowid status says {worker}"
        assert -60000 < t - now < 76000, f"ID {i}: time {t}, now {now:.0f}"
    return ids


GO_APP = """package main

import (
\t"fmt"
\t"os"

\tsnowid "github.com/snowid/snowid/bindings/go"
)

func main() {
\tc, err := snowid.Open("")
\tif err != nil {
\t\tfmt.Fprintln(os.Stderr, err)
\t\tos.Exit(1)
\t}
\tdefer c.Close()
\tfor i := 0; i < %d; i++ {
\t\tid, err := c.Next()
\t\tif err != nil {
\t\t\tfmt.Fprintln(os.Stderr, err)
\t\t\tos.Exit(1)
\t\t}
\t\tfmt.Println(id)
\t}
}
"""


def go(t, tree, env):
    need("go")
    app = os.path.join(t, "go-app")
    os.makedirs(app)
    # go's default -mod=readonly, as a user has it (-mod=mod would add the
    # requirement by itself and hide a README that leaves it out); offline
    env = dict(env, GOPATH=os.path.join(t, "gopath"), GOCACHE=os.path.join(t, "gocache"),
               GOPROXY="off", GOSUMDB="off")
    env.pop("GOFLAGS", None)
    with open(os.path.join(app, "main.go"), "w") as f:
        f.write(GO_APP % N)
    run(["go", "mod", "init", "example.com/app"], app, env)
    cmd = documented("bindings/go/README.md",
                     "go mod edit -require=github.com/snowid/snowid/bindings/go@v0.0.0 "
                     "-replace=github.com/snowid/snowid/bindings/go=/path/to/snowid/bindings/go")
    sh(cmd.replace("/path/to/snowid", tree), app, env)
    run(["go", "build", "-o", "app", "."], app, env)
    return run([os.path.join(app, "app")], app, env)


def python(t, tree, env):
    if not os.path.exists("/usr/bin/python3"):
        raise Skip("/usr/bin/python3 is not installed")
    r = subprocess.run(["/usr/bin/python3", "-c", "import mesonpy, venv, ensurepip"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Skip("Debian's python3-mesonpy or python3-venv is not installed: "
                   + r.stderr.strip().splitlines()[-1])
    doc = "bindings/python/README.md"
    documented(doc, "Install libsnowid first (`meson install -C build`, or its package)")
    documented(doc, "set `PKG_CONFIG_PATH=<prefix>/lib/<triplet>/pkgconfig`")
    venv = documented(doc, "/usr/bin/python3 -m venv --system-site-packages /tmp/venv")
    pip = documented(doc, "/tmp/venv/bin/pip install --no-build-isolation ./bindings/python/pkg")
    v = os.path.join(t, "venv")
    env = dict(env, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_CACHE_DIR=os.path.join(t, "pip-cache"))
    sh(venv.replace("/tmp/venv", v), tree, env)
    sh(pip.replace("/tmp/venv", v), tree, env)
    app = os.path.join(t, "py-app")
    os.makedirs(app)
    with open(os.path.join(app, "app.py"), "w") as f:
        f.write("import snowid\nwith snowid.SnowId() as s:\n"
                f"    for _ in range({N}):\n        print(s.next())\n")
    return run([os.path.join(v, "bin", "python"), "app.py"], app, env)


def node(t, tree, env):
    need("node", "npm", "pkg-config")
    if not os.path.exists("/usr/include/node/node_api.h"):
        raise Skip("/usr/include/node/node_api.h is not installed")
    doc = "bindings/node/README.md"
    documented(doc, "set `PKG_CONFIG_PATH=<prefix>/lib/<triplet>/pkgconfig`")
    cmd = documented(doc, "npm install /path/to/snowid/bindings/node --nodedir=/usr")
    app = os.path.join(t, "node-app")
    os.makedirs(app)
    with open(os.path.join(app, "package.json"), "w") as f:
        f.write('{"name": "app", "version": "1.0.0", "private": true}\n')
    with open(os.path.join(app, "app.js"), "w") as f:
        f.write("const { SnowId } = require('snowid');\nconst ids = new SnowId();\n"
                f"for (let i = 0; i < {N}; i++)\n    console.log(String(ids.next()));\n"
                "ids.close();\n")
    env = dict(env, npm_config_offline="true", npm_config_audit="false",
               npm_config_fund="false", npm_config_update_notifier="false",
               npm_config_cache=os.path.join(t, "npm-cache"),
               npm_config_devdir=os.path.join(t, "node-gyp"))
    env.pop("SNOWID_NODE_ADDON", None)
    sh(cmd.replace("/path/to/snowid", tree), app, env)
    # no LD_LIBRARY_PATH: the addon finds libsnowid by its run path
    return run(["node", "app.js"], app, env)


RUST_APP = """fn main() -> std::io::Result<()> {
    let ids = snowid::Snowid::open()?;
    for _ in 0..%d {
        println!("{}", ids.next()?);
    }
    Ok(())
}
"""


def rust(t, tree, env, libdir):
    for p in ("/usr/bin/cargo", "/usr/bin/rustc"):
        if not os.path.exists(p):
            raise Skip(f"{p} is not installed (Debian's cargo and rustc)")
    doc = "bindings/rust/README.md"
    dep = documented(doc, 'snowid = { path = "/path/to/snowid/bindings/rust" }')
    documented(doc, "set `SNOWID_LIB_DIR` to the directory that holds `libsnowid.so`")
    documented(doc, "export SNOWID_LIB_DIR=/usr/local/lib/x86_64-linux-gnu")
    build = documented(doc, 'RUSTFLAGS="-C link-arg=-Wl,-rpath,$SNOWID_LIB_DIR" '
                            "cargo build --release")
    app = os.path.join(t, "rust-app")
    os.makedirs(os.path.join(app, "src"))
    with open(os.path.join(app, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n\n'
                "[dependencies]\n" + dep.replace("/path/to/snowid", tree) + "\n")
    with open(os.path.join(app, "src", "main.rs"), "w") as f:
        f.write(RUST_APP % N)
    env = dict(env, CARGO_HOME=os.path.join(t, "cargo-home"), CARGO_NET_OFFLINE="true",
               RUSTC="/usr/bin/rustc", RUSTDOC="/usr/bin/rustdoc", SNOWID_LIB_DIR=libdir,
               PATH="/usr/bin:" + env["PATH"])
    env.pop("CARGO_TARGET_DIR", None)
    # Debian's cargo and rustc (as bindings/rust/meson.build takes them),
    # offline; SNOWID_LIB_DIR is the installed library directory
    sh(build, app, env)
    # no LD_LIBRARY_PATH: the program has the run path RUSTFLAGS gave it
    return run([os.path.join(app, "target", "release", "app")], app, env)


JAVA_APP = """import dev.snowid.SnowId;

public class App {
    public static void main(String[] args) throws Exception {
        try (SnowId ids = SnowId.open()) {
            for (int i = 0; i < %d; i++)
                System.out.println(ids.next());
        }
    }
}
"""


def java(t, tree, env, prefix, libdir):
    need("java", "javac", "jar")
    jar = os.path.join(prefix, "share", "java", "snowid.jar")
    if not os.path.exists(jar):
        raise Skip("the build has no Java client (no snowid.jar installed)")
    doc = "bindings/java/README.md"
    cmd = documented(doc, "java -Djava.library.path=/usr/local/lib/x86_64-linux-gnu/jni "
                          "-cp /usr/local/share/java/snowid.jar:app.jar App")
    app = os.path.join(t, "java-app")
    os.makedirs(app)
    with open(os.path.join(app, "App.java"), "w") as f:
        f.write(JAVA_APP % N)
    for line in ("javac -cp /usr/local/share/java/snowid.jar -d classes App.java",
                 "jar cf app.jar -C classes ."):
        sh(documented(doc, line).replace("/usr/local", prefix), app, env)
    # the glue's run path is the configured prefix's library directory, which
    # a staged install (--destdir) cannot honour: the loader is told here
    env = dict(env, LD_LIBRARY_PATH=libdir)
    cmd = cmd.replace("/usr/local/lib/x86_64-linux-gnu", "\0").replace("/usr/local", prefix)
    cmd = cmd.replace("\0", libdir)
    return sh(cmd, app, env)


def install(t):
    """meson install into t/stage; snowid.pc pointed at where it landed.
    Returns (prefix, libdir) of the installed tree."""
    stage = os.path.join(t, "stage")
    run(["meson", "install", "-C", BUILD, "--destdir", stage, "--no-rebuild", "--quiet"],
        ROOT, os.environ)

    opts = {o["name"]: o["value"] for o in json.loads(run(
        ["meson", "introspect", "--buildoptions", BUILD], ROOT, os.environ))}
    prefix = stage + opts["prefix"]
    libdir = os.path.join(prefix, opts["libdir"])
    pc = os.path.join(libdir, "pkgconfig", "snowid.pc")
    with open(pc) as f:
        text = f.read()
    with open(pc, "w") as f:
        f.write(re.sub(r"^prefix=.*$", "prefix=" + prefix, text, count=1, flags=re.M))
    return prefix, libdir


def copy_tree(t):
    """The bindings' sources, as a clone would have them (no build output)."""
    tree = os.path.join(t, "snowid")
    for lang in ("go", "python", "node", "rust"):
        shutil.copytree(os.path.join(ROOT, "bindings", lang), os.path.join(tree, "bindings", lang),
                        ignore=shutil.ignore_patterns("build", "target", "node_modules",
                                                      "__pycache__"))
    return tree


def main():
    if shutil.which("etcd") is None:
        print("etcd is not installed: skipping")
        return 77
    h = Harness("readme")
    t = tempfile.mkdtemp(prefix="snowid-readme-paths-")
    results = {}
    try:
        start = time.monotonic()
        prefix, libdir = install(t)
        tree = copy_tree(t)
        log(f"libsnowid installed under {prefix} ({time.monotonic() - start:.1f} s)")
        etcd = Etcd(h)
        Daemon(h, etcd).start()
        worker = int(cli_status(h.instance)["worker"])
        env = dict(os.environ, SNOWID_INSTANCE=h.instance, SNOWID_RUNTIME_DIR=h.rundir,
                   HOME=os.path.join(t, "home"),
                   PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        env.pop("LD_LIBRARY_PATH", None)
        os.makedirs(env["HOME"])
        steps = [("go", lambda: go(t, tree, env)),
                 ("python", lambda: python(t, tree, env)),
                 ("node", lambda: node(t, tree, env)),
                 ("rust", lambda: rust(t, tree, env, libdir)),
                 ("java", lambda: java(t, tree, env, prefix, libdir))]
        for lang, fn in steps:
            start = time.monotonic()
            try:
                ids = check_ids(fn(), worker)
                results[lang] = "ok"
                log(f"ok {lang} ({time.monotonic() - start:.1f} s): {ids[0]} ... {ids[-1]}")
            except Skip as e:
                results[lang] = "skip"
                log(f"SKIP {lang}: {e}")
            except Exception as e:   # noqa: BLE001: every failure is reported, then the next
                results[lang] = "fail"
                log(f"FAILED {lang} ({time.monotonic() - start:.1f} s): {e}")
    finally:
        h.failed = "fail" in results.values()
        h.close()
        if h.failed:
            log(f"files kept in {t}")
        else:
            shutil.rmtree(t, ignore_errors=True)
    ok = sum(1 for r in results.values() if r == "ok")
    bad = sum(1 for r in results.values() if r == "fail")
    print(f"{ok} passed, {bad} failed")
    if bad:
        return 1
    return 0 if ok else 77


if __name__ == "__main__":
    sys.exit(main())
