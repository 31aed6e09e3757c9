#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The images and the Kubernetes manifests, run: deploy/image/build.sh makes
the two images from the project's Debian packages, podman loads them, and
`podman kube play` runs the pods of deploy/kubernetes/ on this machine as one
node, against an etcd of the test's own:

- the images: built twice, the same digests; no shell, their users, their
  labels;
- the snowidd pod: the DaemonSet's pod template (podman 4.3 plays no
  DaemonSet), its init container giving the hostPath directory to 10990,
  snowidd claiming a worker number and answering /healthz;
- the example client, the Deployment as written: IDs every 2 s from the
  node's worker, in a network and IPC namespace of its own, sharing only the
  directory;
- a restart of the snowidd pod (stopped with SIGTERM, a new pod played, as
  a DaemonSet's controller would) under a client taking an ID every
  millisecond through one handle: no failure, IDs unique and increasing,
  from the node's workers, and the longest gap between two IDs;
- a client pod without the group 10990: refused with the documented error.

What the pods are given differs from a cluster only where one machine needs
it, and each change is said: the hostPath directory is the test's own (not
the machine's /run/snowid); etcd's URL is the test's (reached through
slirp4netns's address of the host's loopback, 10.0.2.2); the Secret is in the
played YAML; `ports` is left out, since podman 4.3 would publish a
containerPort on every address of the host; the pod's restartPolicy is
OnFailure, not Always, since podman 4.3 applies it to init containers too and
would run a finished one again and again.

    tests/kubernetes/test-kube.py [--debs DIR | --images DIR] [--keep]

--debs DIR: the four .debs, else scripts/build-debs.sh builds them; --images
DIR: images build.sh made (snowidd.oci.tar, snowid.oci.tar), not built again.
Needs root on Debian 12; installs podman, runc, slirp4netns, buildah,
mmdebstrap, etcd-server and python3-yaml with apt-get.  Podman's storage,
its configuration (runc, rlimits this machine allows) and its secrets live
in a directory of the test's, removed at the end (--keep keeps it on a
failure).  Prints "ok - ..." / "not ok - ..." per check and ends with
"N passed, N failed"; exit 0 if all pass.
"""
import argparse
import base64
import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KUBE = os.path.join(SRC, "deploy", "kubernetes")
TOOLS = ["podman", "runc", "slirp4netns", "buildah", "mmdebstrap", "etcd-server", "python3-yaml",
         "dpkg-dev", "curl"]
# the host's loopback as a slirp4netns network sees it
HOST_LOOPBACK = "10.0.2.2"
# the default layout, which the ConfigMap keeps
EPOCH_MS, WORKER_BITS, SEQ_BITS = 1735689600000, 10, 12

passed = failed = 0
t_start = time.monotonic()


def log(*a):
    print("# [%s] %s" % (time.strftime("%H:%M:%S"), " ".join(str(x) for x in a)), flush=True)


def ok(what):
    global passed
    passed += 1
    print("ok - " + what, flush=True)


def notok(what):
    global failed
    failed += 1
    print("not ok - " + what, flush=True)


def check(what, cond):
    (ok if cond else notok)(what)
    return cond


class GiveUp(Exception):
    pass


def give_up(what):
    notok(what)
    raise GiveUp(what)


def run(*cmd, check_rc=True, timeout=120, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check_rc and r.returncode != 0:
        give_up("%s: exit %d: %s" % (" ".join(cmd), r.returncode, (r.stderr or r.stdout)[-600:]))
    return r


def wait_for(what, cond, timeout):
    """cond() polled every 100 ms until true (returned) or timeout s (None)."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            return None
        time.sleep(0.1)


def free_ports(n):
    ss = [socket.socket() for _ in range(n)]
    for s in ss:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in ss]
    for s in ss:
        s.close()
    return ports


def install():
    missing = [p for p in TOOLS if "ok installed" not in subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout]
    if missing:
        log("installing", *missing)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing,
                           env=env, capture_output=True, text=True)
        if r.returncode:
            give_up("apt-get install %s: %s" % (" ".join(missing), r.stderr[-400:]))


class Podman:
    """podman with the test's own storage and configuration."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "podman")
        os.makedirs(self.dir)
        conf = os.path.join(self.dir, "containers.conf")
        with open(conf, "w") as f:
            # crun refuses this machine's hybrid cgroups; the default rlimits
            # exceed its hard limits
            # podman's state, networks and volumes in the test's directory
            # too, so that nothing of this machine's podman is touched
            f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
                    '[engine]\nruntime = "runc"\ntmp_dir = "%s/tmp"\nvolume_path = "%s/volumes"\n'
                    '[network]\nnetwork_config_dir = "%s/networks"\n' % ((self.dir,) * 3))
        storage = os.path.join(self.dir, "storage.conf")
        with open(storage, "w") as f:
            f.write('[storage]\ndriver = "overlay"\ngraphroot = "%s/root"\nrunroot = "%s/run"\n'
                    % (self.dir, self.dir))
        self.env = dict(os.environ, CONTAINERS_CONF=conf, CONTAINERS_STORAGE_CONF=storage)

    def __call__(self, *args, check_rc=True, timeout=120):
        return run("podman", *args, check_rc=check_rc, timeout=timeout, env=self.env)

    def play(self, docs, name):
        import yaml
        path = os.path.join(self.dir, name + ".yaml")
        with open(path, "w") as f:
            yaml.safe_dump_all(docs, f)
        return self("kube", "play", "--network", "slirp4netns:allow_host_loopback=true", path)

    def logs(self, ctr):
        r = self("logs", ctr, check_rc=False)
        return r.stdout, r.stderr

    def state(self, ctr):
        r = self("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}} {{.State.Pid}}",
                 ctr, check_rc=False)
        parts = r.stdout.split()
        return (parts[0], int(parts[1]), int(parts[2])) if len(parts) == 3 else (None, None, 0)

    def reset(self):
        """Every pod and image of the test's store gone (its directory is
        removed after)."""
        self("pod", "rm", "--all", "--force", "--time", "2", check_rc=False)
        self("rmi", "--all", "--force", check_rc=False, timeout=60)


def load_yaml(name):
    import yaml
    with open(os.path.join(KUBE, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        give_up("%d %s in the manifest, not 1" % (len(found), kind))
    return found[0]


def for_this_machine(spec, node_dir):
    """What one machine needs changed in a pod spec (said in the docstring):
    the hostPath directory, and no ports (named probe ports made numbers)."""
    ports = {}
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        for p in c.pop("ports", []):
            ports[p.get("name")] = p["containerPort"]
        for probe in ("readinessProbe", "livenessProbe"):
            get = c.get(probe, {}).get("httpGet")
            if get and get.get("port") in ports:
                get["port"] = ports[get["port"]]
    for v in spec.get("volumes", []):
        if v.get("hostPath", {}).get("path") == "/run/snowid":
            v["hostPath"]["path"] = node_dir
    if spec.get("initContainers"):
        spec["restartPolicy"] = "OnFailure"
    return spec


def pod_from(template, name, node_dir, namespace):
    """A Pod of a workload's template (a copy: the template stays as it was)."""
    template = copy.deepcopy(template)
    meta = dict(template["metadata"], name=name, namespace=namespace)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": for_this_machine(template["spec"], node_dir)}


def worker_of(i):
    return (i >> SEQ_BITS) & ((1 << WORKER_BITS) - 1)


def ms_of(i):
    return i >> (WORKER_BITS + SEQ_BITS)


def ns_inode(pid, ns):
    return os.stat("/proc/%d/ns/%s" % (pid, ns)).st_ino


class Etcd:
    def __init__(self, tmp):
        self.port, peer = free_ports(2)
        # on every address of the host's loopback only: slirp4netns reaches
        # it from a pod as 10.0.2.2
        url = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(tmp, "etcd.log"), "w")
        self.proc = subprocess.Popen(
            ["etcd", "--name", "m0", "--data-dir", os.path.join(tmp, "etcd"),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-cluster", "m0=http://127.0.0.1:%d" % peer,
             "--initial-cluster-state", "new", "--log-level", "error"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def healthy(self):
        r = subprocess.run(["curl", "-sf", "-m", "1", "http://127.0.0.1:%d/health" % self.port],
                           capture_output=True, text=True)
        return r.returncode == 0 and '"true"' in r.stdout

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def build_images(args, tmp):
    if args.images:
        return os.path.abspath(args.images), None
    out = os.path.join(tmp, "images")
    debs = os.path.abspath(args.debs) if args.debs else os.path.join(tmp, "debs")
    if not args.debs:
        log("scripts/build-debs.sh", debs)
        r = subprocess.run(["bash", os.path.join(SRC, "scripts", "build-debs.sh"), debs, SRC],
                           capture_output=True, text=True, timeout=900)
        if r.returncode:
            print("# " + "\n# ".join((r.stdout + r.stderr).splitlines()[-30:]))
            give_up("scripts/build-debs.sh built the packages")
    cmd = ["bash", os.path.join(SRC, "deploy", "image", "build.sh"), "--out", out, "--debs", debs]
    log(" ".join(cmd))
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    took = time.monotonic() - t0
    for line in (r.stdout + r.stderr).splitlines():
        print("# build.sh: " + line.lstrip("# "))
    if r.returncode:
        give_up("deploy/image/build.sh: exit %d" % r.returncode)
    ok("deploy/image/build.sh built both images in %.1f s" % took)
    # again, elsewhere: the same images, to the bit
    again = os.path.join(tmp, "images-again")
    r = subprocess.run(cmd[:3] + [again] + cmd[4:], capture_output=True, text=True, timeout=900)
    digests = [digests_of(d) if r.returncode == 0 else [] for d in (out, again)]
    check("built again, the same digests: %s" % (" ".join(digests[1]) or r.stderr[-300:]),
          r.returncode == 0 and digests[0] == digests[1] and len(digests[0]) == 2)
    return out, took


def digests_of(images):
    with open(os.path.join(images, "images.txt")) as f:
        return [line.split()[1] for line in f if not line.startswith("#")]


def check_images(pm, images):
    for name in ("snowidd", "snowid"):
        pm("load", "-q", "-i", os.path.join(images, name + ".oci.tar"))
    with open(os.path.join(images, "images.txt")) as f:
        for line in f:
            if not line.startswith("#"):
                log("image", " ".join(line.split()))
    expect = {"snowidd": ("10990:10990", "/usr/sbin/snowidd"), "snowid": ("10991:10991", "/usr/bin/snowid")}
    for name, (user, entry) in expect.items():
        ref = "snowid/%s:0.1.0" % name
        info = json.loads(pm("image", "inspect", ref).stdout)[0]
        cfg, labels = info["Config"], info.get("Labels") or {}
        check("%s runs as %s (%s), entrypoint %s" % (ref, cfg.get("User"), user, cfg.get("Entrypoint")),
              cfg.get("User") == user and cfg.get("Entrypoint") == [entry])
        want = ["org.opencontainers.image.%s" % k for k in ("version", "licenses", "revision", "created", "title")]
        check("%s is labelled %s" % (ref, ", ".join("%s=%s" % (k.rsplit(".", 1)[1], labels.get(k)) for k in want)),
              all(labels.get(k) for k in want) and labels.get(want[0]) == "0.1.0")
        size = info.get("Size", 0)
        log("%s: %.1f MiB unpacked, %d layer(s)" % (ref, size / 1048576, len(info["RootFS"]["Layers"])))
        # no shell: nothing in the image can run one
        r = pm("run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", ref, "-c", "true",
               check_rc=False)
        check("%s has no shell (/bin/sh: %s)" % (ref, r.stderr.strip().rsplit(":", 1)[-1].strip()[:60]),
              r.returncode != 0 and "no such file" in r.stderr.lower())
    r = pm("run", "--rm", "--network", "none", "--entrypoint", "/usr/bin/snowid", "snowid/snowid:0.1.0",
           "decode", "--json", "1", check_rc=False)
    check("the client image's snowid runs: decode 1 -> %s" % r.stdout.strip()[:80],
          r.returncode == 0 and '"worker"' in r.stdout)
    r = pm("run", "--rm", "--network", "none", "--entrypoint", "/usr/bin/id", "snowid/snowid:0.1.0",
           check_rc=False)
    check("the client image has no coreutils either (id: not found)",
          r.returncode != 0 and "not found" in r.stderr)


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--debs")
    g.add_argument("--images")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("# needs root (apt-get, podman)")
        print("0 passed, 1 failed")
        return 1

    tmp = tempfile.mkdtemp(prefix="snowid-kube.")
    os.chmod(tmp, 0o755)
    pm = etcd = None
    try:
        install()
        import yaml  # noqa: F401 (installed above)
        images, _ = build_images(args, tmp)
        pm = Podman(tmp)
        check_images(pm, images)
        etcd = Etcd(tmp)
        if not wait_for("etcd", etcd.healthy, 30):
            give_up("etcd on 127.0.0.1:%d became healthy" % etcd.port)
        scenario(pm, etcd, tmp)
    except GiveUp:
        pass
    except Exception as e:  # a bug of the test itself: said, counted
        import traceback
        traceback.print_exc(file=sys.stdout)
        notok("the test ran to its end (%s: %s)" % (type(e).__name__, e))
    finally:
        if pm and not (failed and args.keep):
            pm.reset()
        if etcd:
            etcd.stop()
        if failed and args.keep:
            log("kept %s; podman there: CONTAINERS_CONF=%s/containers.conf "
                "CONTAINERS_STORAGE_CONF=%s/storage.conf podman ..." % (tmp, pm.dir, pm.dir)
                if pm else "kept %s" % tmp)
        else:
            # what podman left mounted there (its overlay), deepest first
            with open("/proc/mounts") as f:
                mounts = [line.split()[1] for line in f if line.split()[1].startswith(tmp + "/")]
            for m in sorted(mounts, reverse=True):
                subprocess.run(["umount", "-l", m], capture_output=True)
            subprocess.run(["rm", "-rf", "--one-file-system", tmp])
        log("%.0f s" % (time.monotonic() - t_start))
        print("%d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


def scenario(pm, etcd, tmp):
    node_dir = os.path.join(tmp, "node", "run-snowid")  # the node's /run/snowid
    os.makedirs(os.path.dirname(node_dir))
    cluster = "kube-%d-%d" % (os.getpid(), int(time.time()))

    # ---- the snowidd pod: the DaemonSet's template, its ConfigMap, a Secret
    docs = load_yaml("snowidd-daemonset.yaml")
    ds, cm = one(docs, "DaemonSet"), one(docs, "ConfigMap")
    conf = cm["data"]["snowidd.conf"]
    placeholder = "http://etcd.snowid.svc:2379"
    if placeholder not in conf:
        give_up("the ConfigMap names etcd as %s" % placeholder)
    cm["data"]["snowidd.conf"] = conf.replace(
        placeholder, "http://%s:%d" % (HOST_LOOPBACK, etcd.port)).replace(
        "cluster = default", "cluster = " + cluster)
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "snowidd-http-token", "namespace": "snowid"},
              # data, not stringData: podman 4.3 mounts only data
              "data": {"http-token": base64.b64encode(os.urandom(16).hex().encode()).decode()}}
    # podman keeps the Secret once played, and refuses it played again
    name, t0 = play_snowidd(pm, ds, [cm, secret], node_dir, 1)
    ctr = name + "-snowidd"
    claimed = wait_for("claim", lambda: claimed_worker(pm, ctr), 60)
    if claimed is None:
        out, err = pm.logs(ctr)
        print("# " + "\n# ".join((out + err).splitlines()[-30:]))
        give_up("snowidd in pod %s claimed a worker number within 60 s" % name)
    worker = claimed
    ok("the snowidd pod (the DaemonSet's template) claimed worker %d, %.1f s after kube play"
       % (worker, time.monotonic() - t0))
    st = os.stat(node_dir)
    # podman removes an init container once it has succeeded
    check("its init container (snowidd --prepare-runtime-dir) ran and is gone (%s); the node's "
          "directory is %d:%d mode %o" % (pm.state(name + "-own-runtime-dir")[0], st.st_uid,
                                          st.st_gid, st.st_mode & 0o7777),
          pm.state(name + "-own-runtime-dir")[0] is None and (st.st_uid, st.st_gid) == (10990, 10990)
          and st.st_mode & 0o7777 == 0o755)
    check("the socket is in it: %s" % sorted(os.listdir(node_dir)),
          "default.sock" in os.listdir(node_dir))
    _, _, dpid = pm.state(ctr)
    r = run("nsenter", "-t", str(dpid), "-n", "curl", "-s", "-m", "5", "-o", "/dev/null", "-w",
            "%{http_code}", "http://127.0.0.1:7723/healthz", check_rc=False)
    check("/healthz in the pod's network answers %s (the readiness probe)" % r.stdout, r.stdout == "200")
    r = pm("exec", ctr, "snowid", "status", "--json", check_rc=False)
    check("snowid status in the daemon's container: worker %s" % _json_get(r.stdout, "worker"),
          r.returncode == 0 and _json_get(r.stdout, "worker") == worker)

    # ---- the example client, the Deployment as written
    cdocs = load_yaml("example-client.yaml")
    dep = one(cdocs, "Deployment")
    for_this_machine(dep["spec"]["template"]["spec"], node_dir)
    pm.play([dep], "example-client")
    cpod = pm("pod", "ps", "--format", "{{.Name}}", "--filter", "name=snowid-example-client").stdout.split()
    cpod = cpod[0] if cpod else "snowid-example-client-pod-0"
    cctrs = [c for c in pm("ps", "-a", "--format", "{{.Names}}").stdout.split()
             if c.startswith(cpod) and not c.endswith("-infra")]
    if not cctrs:
        give_up("kube play of example-client.yaml made a client container (%s)"
                % pm("ps", "-a", "--format", "{{.Names}}").stdout.split())
    cctr = cctrs[0]
    ids = wait_for("ids", lambda: (lambda v: v if len(v) >= 10 else None)(ids_in(pm.logs(cctr)[0])), 30)
    out, err = pm.logs(cctr)
    ids = ids_in(out)
    check("the example client (%s, `snowid next -n 5 --every 2000`) printed %d IDs, all from "
          "worker %d: %s" % (cctr, len(ids), worker, sorted({worker_of(i) for i in ids})),
          len(ids) >= 10 and {worker_of(i) for i in ids} == {worker} and len(set(ids)) == len(ids))
    check("and no error: %r" % err.strip()[:200], err.strip() == "")
    _, _, cpid = pm.state(cctr)
    check("the client is in its own network and IPC namespaces (net %d vs %d, ipc %d vs %d)"
          % (ns_inode(cpid, "net"), ns_inode(dpid, "net"), ns_inode(cpid, "ipc"), ns_inode(dpid, "ipc")),
          ns_inode(cpid, "net") != ns_inode(dpid, "net") and ns_inode(cpid, "ipc") != ns_inode(dpid, "ipc")
          and ns_inode(cpid, "net") != ns_inode(os.getpid(), "net"))
    mounts = open("/proc/%d/mountinfo" % cpid).read().splitlines()
    run_mount = [m.split() for m in mounts if m.split()[4] == "/run/snowid"]
    check("it mounts /run/snowid read-only: %s" % (run_mount[0][5] if run_mount else "not mounted"),
          bool(run_mount) and run_mount[0][5].split(",")[0] == "ro")
    pm("pod", "rm", "--force", "--time", "2", cpod, check_rc=False)

    # ---- a restart of the snowidd pod under a client taking an ID every ms
    taker = pod_from(dep["spec"]["template"], "taker", node_dir, "snowid-example")
    taker["spec"]["containers"][0]["command"] = ["snowid", "next", "-n", "1", "--every", "1"]
    taker["spec"]["restartPolicy"] = "Never"
    pm.play([taker], "taker")
    tctr = "taker-client"
    if not wait_for("taker", lambda: len(ids_in(pm.logs(tctr)[0])) >= 500, 30):
        give_up("the taker pod took IDs (%r)" % (pm.logs(tctr)[1][-300:]))
    workers = {worker}
    log("stopping the snowidd pod (SIGTERM, as a rolling update does)")
    t_stop = time.monotonic()
    # the old segment cannot outlive this: its mark was last written before
    # now, at most window + mark-step past its ID time, which the last ID
    # taken shows (ahead of the clock on a new cluster: docs/fences.md)
    window_ms = 1000 * (int(conf_value(cm["data"]["snowidd.conf"], "window")) +
                        mark_step_s(pm))
    taken = ids_in(pm.logs(tctr)[0])
    old_deadline_max = max(time.time() * 1000, ms_of(taken[-1]) + EPOCH_MS + 1000) + window_ms
    pm("pod", "stop", "--time", "10", name, timeout=60)
    stopped = time.monotonic() - t_stop
    pm("pod", "rm", "--force", name)
    name, t0 = play_snowidd(pm, ds, [cm], node_dir, 2)
    ctr = name + "-snowidd"
    claimed = wait_for("claim", lambda: claimed_worker(pm, ctr), 60)
    if claimed is None:
        give_up("the new snowidd pod claimed a worker number within 60 s")
    workers.add(claimed)
    log("the new pod claimed worker %d, %.1f s after the old one was told to stop (it took %.1f s "
        "to stop)" % (claimed, time.monotonic() - t_stop, stopped))
    # the old segment is good until its deadline: the taker moves to the new
    # one then.  An ID stamped after the latest deadline the old one could
    # have is the new one's.
    new_id = wait_for("move", lambda: moved(pm.logs(tctr)[0], old_deadline_max + 500),
                      window_ms / 1000 + 20)
    pm("stop", "--time", "5", tctr, check_rc=False)
    out, err = pm.logs(tctr)
    ids = ids_in(out)
    st = pm.state(tctr)
    gaps = [b - a for a, b in zip(map(ms_of, ids), map(ms_of, ids[1:]))]
    longest = max(gaps) if gaps else None
    check("the taker ran across the restart: %d IDs over %.1f s, exit %s on SIGTERM"
          % (len(ids), (ms_of(ids[-1]) - ms_of(ids[0])) / 1000 if ids else 0, st[1]),
          len(ids) > 5000 and st[1] == 0)
    check("its IDs are unique and increasing", ids == sorted(set(ids)))
    check("they come from the node's workers %s: %s" % (sorted(workers), sorted({worker_of(i) for i in ids})),
          {worker_of(i) for i in ids} <= workers)
    check("it moved to the new pod's segment: an ID stamped past the old one's latest deadline, "
          "from worker %s" % (worker_of(new_id) if new_id else None),
          bool(new_id) and worker_of(new_id) == claimed)
    check("no call failed across the restart: %r" % err.strip()[:300], err.strip() == "")
    check("the longest gap between two of its IDs was %s ms (one is taken every ms; the documented "
          "bound: none while the new pod holds a lease within the window)" % longest,
          longest is not None and longest <= 1000)
    print("# figure: longest gap across a snowidd pod restart: %s ms" % longest)

    # ---- a client pod without the group: refused
    bad = pod_from(dep["spec"]["template"], "nogroup", node_dir, "snowid-example")
    bad["spec"]["securityContext"].pop("supplementalGroups")
    bad["spec"]["containers"][0]["command"] = ["snowid", "next"]
    bad["spec"]["restartPolicy"] = "Never"
    pm.play([bad], "nogroup")
    bctr = "nogroup-client"
    done = wait_for("exit", lambda: pm.state(bctr)[0] == "exited", 30)
    out, err = pm.logs(bctr)
    st = pm.state(bctr)
    check("a client pod without the group 10990 is refused: exit %s, %r" % (st[1], err.strip()[:160]),
          bool(done) and st[1] == 1 and "permission denied" in err and not ids_in(out))


def mark_step_s(pm):
    """mark-step: the ConfigMap leaves it at snowidd's default."""
    out = pm("run", "--rm", "--network", "none", "--entrypoint", "/usr/sbin/snowidd",
             "snowid/snowidd:0.1.0", "--help").stdout
    text = " ".join(out.split("--mark-step", 1)[1].split("\n  --", 1)[0].split())
    if "(default " not in text:
        give_up("snowidd --help gives mark-step's default")
    return int(text.split("(default ", 1)[1].split(")")[0])


def conf_value(conf, key):
    for line in conf.splitlines():
        k, _, v = line.partition("=")
        if k.strip() == key:
            return v.strip()
    give_up("the ConfigMap sets %s" % key)


def _json_get(text, key):
    try:
        return json.loads(text).get(key)
    except ValueError:
        return None


def ids_in(text):
    return [int(x) for x in text.split() if x.isdigit()]


def claimed_worker(pm, ctr):
    out, err = pm.logs(ctr)
    for line in (out + err).splitlines():
        if "Claimed worker number" in line:
            return int(line.split("Claimed worker number", 1)[1].split()[0].strip(",.:"))
    return None


def moved(out, after_ms):
    """The last ID if one is stamped after after_ms (unix ms), else None."""
    ids = ids_in(out)
    return ids[-1] if ids and ms_of(ids[-1]) + EPOCH_MS > after_ms else None


def play_snowidd(pm, ds, docs, node_dir, n):
    """The DaemonSet's pod template as pod snowidd-node-N, played with docs
    (its ConfigMap; the Secret the first time: podman keeps it)."""
    name = "snowidd-node-%d" % n
    t0 = time.monotonic()
    pm.play(docs + [pod_from(ds["spec"]["template"], name, node_dir, "snowid")], name)
    return name, t0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(130))
    sys.exit(main())
