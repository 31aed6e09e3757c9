# SPDX-License-Identifier: MIT
"""etcd refusing snowidd: a wrong password, a user without a role, a CA that
does not match, a client certificate the gateway refuses.  Each is said once,
in etcd's or TLS's words with the setting to check, and exits 78 before
READY; after READY the daemon keeps going, says so on /healthz and in
`snowid status`, and recovers once the cause is fixed.  And the settings
that name files are read at start."""
import json
import os
import re
import subprocess

from harness import (SNOWIDD, Daemon, Etcd, cli, cli_status, free_port, http_get,
                     kill_quietly, log, run, take, wait_for)

ROOT = "root:rootpw"


# a line the daemon logs (daemon/log.c): timestamped, or an error's level
# under the journal
LOG_LINE = re.compile(r"\d\d:\d\d:\d\d\.\d{3} snowidd: |<3>")


def run_d(h, urls, *args, timeout=30):
    """snowidd run to its end (a refusal before READY ends it)."""
    return subprocess.run([SNOWIDD, "--config", "/dev/null", "--runtime-dir", h.rundir,
                           "--instance", h.instance + "-x", "--etcd", urls, *args],
                          capture_output=True, text=True, timeout=timeout)


def write(h, name, text):
    path = h.path(name)
    with open(path, "w") as f:
        f.write(text)
    return path


def refused_once(r, cls, *words):
    """A run that ended 78 with one refusal line holding cls and words, and
    no claim that etcd is unreachable."""
    assert r.returncode == 78, f"exit {r.returncode}, not 78:\n{r.stderr}"
    lines = [l for l in r.stderr.splitlines() if "refuses snowidd" in l]
    assert len(lines) == 1, f"{len(lines)} refusal lines:\n{r.stderr}"
    for w in (f"({cls})",) + words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    assert "unreachable" not in r.stderr, r.stderr
    log(lines[0].split("snowidd: ", 1)[1][:200])


def healthz(port):
    return http_get(port, "/healthz")


def test_auth_and_roles(h):
    etcd = Etcd(h)
    url = etcd.urls[0]

    def ctl(*args):
        return etcd.etcdctl("--endpoints", url, "--user", ROOT, *args)

    def passwd(new):
        subprocess.run(["etcdctl", "--endpoints", url, "--user", ROOT, "user", "passwd", "worker",
                        "--interactive=false"], input=new + "\n", text=True, check=True,
                       capture_output=True, env=dict(os.environ, ETCDCTL_API="3"))

    etcd.etcdctl("--endpoints", url, "user", "add", ROOT)
    ctl("role", "add", "root")
    ctl("user", "grant-role", "root", "root")
    ctl("user", "add", "worker:wpw")
    ctl("role", "add", "workers")
    ctl("role", "grant-permission", "workers", "readwrite", "/snowid/good/", "--prefix=true")
    ctl("user", "grant-role", "worker", "workers")
    ctl("auth", "enable")
    good = write(h, "pw", "wpw\n")
    bad = write(h, "badpw", "nope\n")

    # a wrong password: etcd's words, and the settings to check
    r = run_d(h, url, "--cluster", "good", "--etcd-user", "worker", "--etcd-password-file", bad)
    refused_once(r, "etcd-auth", "authentication failed", "etcd-password-file", bad)
    # authentication on in etcd, and no user given
    r = run_d(h, url, "--cluster", "good")
    refused_once(r, "etcd-auth", "user name is empty", "set etcd-user")
    # a user with no role on this cluster's prefix
    r = run_d(h, url, "--cluster", "other", "--etcd-user", "worker", "--etcd-password-file", good)
    refused_once(r, "etcd-permission", "permission denied", "/snowid/other/")

    # after READY: the daemon goes on and says so
    port = free_port()
    d = Daemon(h, etcd, args=["--cluster", "good", "--etcd-user", "worker",
                              "--etcd-password-file", good, "--http", f"127.0.0.1:{port}"]).start()
    assert healthz(port)[0] == 200
    before = take(h.instance, 3)
    assert "etcd error" not in cli_status(h.instance)

    # the role revoked: mark extensions are refused, keepalives are not
    ctl("user", "revoke-role", "worker", "workers")
    wait_for(lambda: healthz(port)[0] == 503 and "etcd-permission" in healthz(port)[1], 20,
             "/healthz to say etcd-permission")
    st = cli_status(h.instance)
    assert st.get("etcd error", "").startswith("etcd-permission: ") and \
        "permission denied" in st["etcd error"], st
    # as JSON: store_error*, and etcd_error* the same until the next release
    j = json.loads(cli("status", "--instance", h.instance, "--json").stdout)
    assert j.get("store_error") == j.get("etcd_error") == "etcd-permission", j
    assert "permission denied" in j.get("store_error_message", ""), j
    assert j["store_error_message"] == j.get("etcd_error_message"), j
    code, body = http_get(port, "/v1/status")
    j = json.loads(body) if code == 200 else {}
    assert j.get("etcd_error") == "etcd-permission" and \
        "permission denied" in j.get("etcd_error_message", ""), body
    assert j.get("store_error") == j["etcd_error"] and \
        j.get("store_error_message") == j["etcd_error_message"], body
    # retried, and said once
    wait_for(lambda: d.log_text().count("Extending the mark failed: etcdserver: permission denied")
             >= 3, 30, "three refused extensions")
    assert d.log_text().count("refuses snowidd") == 1, d.log_text()
    assert "etcd is unreachable" not in d.log_text()
    assert d.proc.poll() is None
    assert "etcd-permission" in d.status(), d.status()

    # fixed: it goes on by itself
    ctl("user", "grant-role", "worker", "workers")
    wait_for(lambda: healthz(port)[0] == 200, 45, "/healthz to be 200 again")
    assert "etcd error" not in cli_status(h.instance)
    assert "takes snowidd's requests again (etcd-permission is over)" in d.log_text()
    assert min(take(h.instance, 3)) > max(before)

    # the password changed under it: its token is dropped, and
    # authenticating again is refused
    passwd("changed")
    wait_for(lambda: healthz(port)[0] == 503 and "etcd-auth" in healthz(port)[1], 20,
             "/healthz to say etcd-auth")
    st = cli_status(h.instance)
    assert st.get("etcd error", "").startswith("etcd-auth: ") and \
        "authentication failed" in st["etcd error"], st
    assert d.log_text().count("refuses snowidd (etcd-auth)") == 1
    assert d.proc.poll() is None
    passwd("wpw")
    wait_for(lambda: healthz(port)[0] == 200, 60, "/healthz to be 200 after the password")
    assert "etcd error" not in cli_status(h.instance)
    assert d.log_text().count("refuses snowidd (etcd-auth)") == 1
    take(h.instance, 3)
    assert d.stop() == 0


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certs(h):
    """A CA, etcd's certificate (for 127.0.0.1), a client certificate with no
    CommonName, one with a CommonName, and an unrelated CA."""
    p = h.path
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for ca in ("ca", "other"):
        openssl("req", "-x509", *ec, "-keyout", p(f"{ca}.key"), "-out", p(f"{ca}.crt"),
                "-days", "2", "-subj", f"/CN=snowid test {ca}")
    exts = {"server": "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
            "nocn": "extendedKeyUsage=clientAuth\n", "withcn": "extendedKeyUsage=clientAuth\n"}
    subj = {"server": "/CN=etcd", "nocn": "/O=snowid", "withcn": "/CN=worker"}
    for name, ext in exts.items():
        openssl("req", *ec, "-keyout", p(f"{name}.key"), "-out", p(f"{name}.csr"),
                "-subj", subj[name])
        openssl("x509", "-req", "-in", p(f"{name}.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-out", p(f"{name}.crt"), "-days", "2",
                "-extfile", write(h, f"{name}.ext", ext))


class TlsEtcd:
    """One etcd member on https that asks for client certificates."""

    def __init__(self, h):
        client, peer = free_port(), free_port()
        self.urls = [f"https://127.0.0.1:{client}"]
        self.h = h
        cmd = ["etcd", "--name", "m0", "--data-dir", h.path("etcd-tls"),
               "--listen-client-urls", self.urls[0], "--advertise-client-urls", self.urls[0],
               "--listen-peer-urls", f"http://127.0.0.1:{peer}",
               "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
               "--initial-cluster", f"m0=http://127.0.0.1:{peer}",
               "--cert-file", h.path("server.crt"), "--key-file", h.path("server.key"),
               "--trusted-ca-file", h.path("ca.crt"), "--client-cert-auth", "--log-level", "error"]
        with open(h.path("etcd-tls.log"), "ab") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=logf)
        h.cleanup(lambda: kill_quietly(self.proc))
        wait_for(self.healthy, 30, "etcd on TLS to be healthy", interval=0.1)

    def etcdctl(self, *args, user=None):
        cmd = ["etcdctl", "--endpoints", self.urls[0], "--cacert", self.h.path("ca.crt"),
               "--cert", self.h.path("nocn.crt"), "--key", self.h.path("nocn.key")]
        r = subprocess.run(cmd + (["--user", user] if user else []) + list(args),
                           capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, ETCDCTL_API="3"))
        assert r.returncode == 0, f"etcdctl {args}: {r.stderr}"
        return r.stdout

    def healthy(self):
        try:
            self.etcdctl("endpoint", "health")
            return True
        except AssertionError:
            return False


def test_tls(h):
    make_certs(h)
    etcd = TlsEtcd(h)
    url = etcd.urls[0]
    etcd.etcdctl("user", "add", ROOT)
    for args in (("role", "add", "root"), ("user", "grant-role", "root", "root"),
                 ("user", "add", "worker:wpw"), ("role", "add", "workers"),
                 ("role", "grant-permission", "workers", "readwrite", "/snowid/default/",
                  "--prefix=true"),
                 ("user", "grant-role", "worker", "workers"), ("auth", "enable")):
        etcd.etcdctl(*args, user=ROOT)
    pw = write(h, "pw", "wpw\n")
    p = h.path
    good = ["--etcd-cacert", p("ca.crt"), "--etcd-cert", p("nocn.crt"), "--etcd-key",
            p("nocn.key"), "--etcd-user", "worker", "--etcd-password-file", pw]

    # etcd's certificate is not signed by the CA given: TLS's words
    r = run_d(h, url, *good, "--etcd-cacert", p("other.crt"))
    refused_once(r, "etcd-tls", "SSL certificate problem", "etcd-cacert", p("other.crt"))
    # a client certificate with a CommonName, auth on: the gateway's words
    r = run_d(h, url, *good, "--etcd-cert", p("withcn.crt"), "--etcd-key", p("withcn.key"))
    refused_once(r, "etcd-cert", "CommonName of client sending a request against gateway",
                 "etcd-cert", p("withcn.crt"))
    # no client certificate at all: etcd's TLS alert
    r = run_d(h, url, "--etcd-cacert", p("ca.crt"), "--etcd-user", "worker",
              "--etcd-password-file", pw)
    refused_once(r, "etcd-cert", "alert", "set etcd-cert and etcd-key")

    # the same settings with the right ones: it serves
    d = Daemon(h, etcd, args=good).start()
    assert len(take(h.instance, 3)) == 3
    assert "refuses" not in d.log_text()
    assert d.stop() == 0


def test_check_config(h):
    def check(*args):
        return subprocess.run([SNOWIDD, "--config", "/dev/null", "--runtime-dir", h.rundir,
                               "--check-config", *args], capture_output=True, text=True,
                              timeout=20)

    def refused(r, *words):
        assert r.returncode == 78, f"exit {r.returncode}: {r.stderr}"
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and LOG_LINE.match(lines[0]), r.stderr
        for w in words:
            assert w in lines[0], f"{w!r} not in {lines[0]!r}"
        return lines[0]

    present = write(h, "present.pem", "-----BEGIN CERTIFICATE-----\n")
    missing = h.path("missing.pem")
    token = write(h, "token", "t0ken\n")
    # every file it is given is opened and read
    for args, key in ((["--etcd-cacert", missing], "etcd-cacert"),
                      (["--etcd-cert", missing, "--etcd-key", present], "etcd-cert"),
                      (["--etcd-cert", present, "--etcd-key", missing], "etcd-key"),
                      (["--etcd-user", "u", "--etcd-password-file", missing],
                       "etcd-password-file"),
                      (["--http", "127.0.0.1:1", "--http-token-file", missing],
                       "http-token-file")):
        line = refused(check(*args), f"Cannot read {key} {missing}", "No such file")
        log(line)
    refused(check("--etcd-cacert", h.dir), "etcd-cacert", "Is a directory")
    refused(check("--etcd-cacert", write(h, "empty.pem", "")), "etcd-cacert", "empty")
    r = check("--etcd-cacert", present, "--etcd-cert", present, "--etcd-key", present,
              "--etcd-user", "u", "--etcd-password-file", token,
              "--http", "127.0.0.1:1", "--http-token-file", token)
    assert r.returncode == 0 and "valid" in r.stdout, r.stderr
    # a value too long for its buffer is refused, never cut
    long_url = "http://127.0.0.1:2379/" + "p" * 1100
    refused(check("--etcd", "http://127.0.0.1:2379," + long_url), "bad setting etcd",
            "at most 1024 bytes")
    refused(check("--etcd", ",".join(f"http://127.0.0.{i}:2379" for i in range(1, 18))),
            "at most 16 URLs")
    assert check("--etcd", ",".join(f"http://127.0.0.{i}:2379" for i in range(1, 17))) \
        .returncode == 0
    refused(check("--etcd-user", "u", "--etcd-password-file", write(h, "long", "x" * 2000)),
            "longer than 1023 bytes")
    # --config names a directory: refused, not every default
    r = subprocess.run([SNOWIDD, "--config", h.dir, "--check-config"], capture_output=True,
                       text=True, timeout=20)
    refused(r, "not a regular file", h.dir)


if __name__ == "__main__":
    run([test_check_config, test_tls, test_auth_and_roles])
