# SPDX-License-Identifier: MIT
"""The clients in other languages on one segment at once: the C taker and
each binding's taker (bindings/<lang>/), two threads each (one taking single
IDs, one taking batches), while snowidd is made to switch worker numbers
again and again (its lease revoked in etcd, so it claims afresh).  Every ID
every thread took is checked: unique across all languages, increasing within
each thread, and every client followed the switches.

The takers' command lines come from SNOWID_TAKERS (set by bindings/meson.build):
one line per language, "lang<TAB>argv0<TAB>argv1...".  SNOWID_BINDINGS lists
the languages that must be there (comma-separated), so that a binding that
was not built fails the test rather than leaving it out."""
import os
from harness import (Client, Daemon, Etcd, Taker, check_unique_and_increasing, cli_status, decode,
                     log, run, wait_for)

FAST = ["--lease-ttl", "3", "--window", "3", "--renew-interval", "300", "--etcd-timeout", "1000"]
# two worker numbers: each switch is to the other one
TINY = ["--cluster", "tiny", "--time-bits", "50", "--worker-bits", "1", "--seq-bits", "12"]
SWITCHES = 6
RATE = "20000"  # IDs a second per thread: every switch lands mid-stream


def worker(i):
    return decode(i, 1)[1]


def takers_from_env():
    out = {}
    for line in os.environ.get("SNOWID_TAKERS", "").splitlines():
        if line.strip():
            lang, *argv = line.split("\t")
            out[lang] = argv
    return out


class BindingTaker(Taker):
    """A taker in another language: the options and output of tests/taker.c."""

    def __init__(self, h, lang, argv, threads=2, batch=16):
        self.prefix = h.path(f"ids-{lang}")
        self.threads = threads
        cmd = argv + ["-i", h.instance, "-o", self.prefix, "-t", str(threads), "-w", "100000",
                      "-b", str(batch), "-r", RATE]
        Client.__init__(self, h, cmd, f"{lang} taker")


def status_worker(instance):
    """The worker number snowidd publishes, once it holds one; else None."""
    st = cli_status(instance)
    if not st.get("state", "").startswith("leased"):
        return None
    w = st.get("worker", "")
    return int(w.split()[0]) if w[:1].isdigit() else None


def test_all_languages_one_segment(h):
    takers = takers_from_env()
    required = [x for x in os.environ.get("SNOWID_BINDINGS", "").split(",") if x]
    missing = [x for x in required if x not in takers]
    assert not missing, f"bindings not built: {missing}"
    assert takers, "no binding takers (SNOWID_TAKERS is empty)"
    etcd = Etcd(h)
    d = Daemon(h, etcd, args=FAST + TINY).start()
    clients = {"c": Taker(h, threads=1, name="c1", extra=["-r", RATE]),
               "c-batch": Taker(h, threads=1, batch=16, name="c16", extra=["-r", RATE])}
    for lang, argv in sorted(takers.items()):
        clients[lang] = BindingTaker(h, lang, argv)
    log(f"takers: {', '.join(clients)}")

    def all_on(w):
        return all(c.last_id(t) is not None and worker(c.last_id(t)) == w
                   for c in clients.values() for t in range(c.threads))

    # Each round: every thread of every client takes IDs on the number the
    # daemon holds (the numbers alternate, and a thread's IDs only rise, so
    # an ID on it is an ID of the current claim); then the test takes that
    # number's key under a lease of its own, as a host that took it over
    # would, so that the daemon's next mark write fails and it claims the
    # other number; then it gives the number back.
    seen = []
    for n in range(SWITCHES):
        wait_for(lambda: status_worker(h.instance) is not None, 20, "the daemon to hold a number")
        w = status_worker(h.instance)
        wait_for(lambda: all_on(w), 20, f"every thread to take IDs on worker {w}")
        seen.append(w)
        lease = etcd.grant(30)
        etcd.put(f"/snowid/tiny/workers/{w}", "taken-by-test", lease=lease)
        wait_for(lambda: status_worker(h.instance) not in (None, w), 20,
                 f"the daemon to move off worker {w}")
        etcd.call("/v3/lease/revoke", {"ID": lease})
        log(f"switch {n + 1}: off worker {w}")
    results = {name: c.stop() for name, c in clients.items()}
    lists, total = [], 0
    for name, c in clients.items():
        ids = c.ids()
        r = results[name]
        assert r["other_errors"] == 0, f"{name}: errors other than EAGAIN: {r}"
        got = sum(len(x) for x in ids)
        assert got == r["ids"], f"{name}: says {r['ids']} IDs, wrote {got}"
        for t, x in enumerate(ids):
            assert x, f"{name} thread {t} took no ID"
            ws = {worker(i) for i in x}
            assert ws == {0, 1}, f"{name} thread {t}: IDs from workers {ws} only"
        lists += ids
        log(f"{name}: {got} IDs, {r['eagain']} EAGAIN")
    total = check_unique_and_increasing(lists)
    log(f"{total} IDs from {len(clients)} clients ({', '.join(clients)}), {SWITCHES} switches "
        f"(workers {seen}): all unique, each thread increasing")
    d.stop()


if __name__ == "__main__":
    run([test_all_languages_one_segment])
