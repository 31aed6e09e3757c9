# SPDX-License-Identifier: MIT
"""PostgreSQL killed (-9) after a run of keepalives.

Every write of the store commits with the flush, keepalives too
(docs/postgres.md, "Commits and the flush"): a keepalive lost in a crash
would end the lease earlier than its holder counts, and another daemon's
claim of the number would then halt the holder as if the store had been
restored.  Here the WAL writer is stopped (SIGSTOP) right after a mark's
write, so that only a commit that waits for its own flush reaches the disk;
the holder renews seven times; the server is killed and comes back.  The
lease must come back as the holder counts it, the holder must go on with
no halt, and a second daemon on the cluster's one number must not take it
until the holder gives it up; every ID of both unique."""
import os
import signal
import time

import harness
from harness import (Daemon, PgStore, check_unique_and_increasing, decode, log, run, take,
                     try_take, wait_for)

# one worker number: the second daemon can only take the first's
LAYOUT = ["--time-bits", "51", "--worker-bits", "0", "--seq-bits", "12"]
# extensions far apart, so that only keepalives are written for a while
ARGS = LAYOUT + ["--lease-ttl", "10", "--mark-step", "30", "--renew-interval", "1000"]


def lease_row(pg):
    """(expires_at as epoch seconds, mark, mark_rev) of number 0 and its
    holder's lease; None if it has none."""
    out = pg.pg.psql("SELECT extract(epoch FROM l.expires_at), x.mark, x.mark_rev "
                     "FROM snowid.numbers x JOIN snowid.leases l ON l.id = x.lease "
                     "WHERE x.n = 0").strip()
    if not out:
        return None
    e, m, r = out.split("|")
    return float(e), int(m), int(r)


def test_keepalive_durable(h):
    pg = PgStore(h)
    a = Daemon(h, pg, instance=h.instance + "-a", name="a", args=ARGS).start()
    ids_a = take(a.instance, 200)
    first = lease_row(pg)
    wait_for(lambda: lease_row(pg)[2] != first[2], 60, "a mark extension")
    after_mark = lease_row(pg)[0]
    # from here only a commit that waits for its own flush is on disk
    walwriter = int(pg.pg.psql("SELECT pid FROM pg_stat_activity "
                               "WHERE backend_type = 'walwriter'").strip())
    os.kill(walwriter, signal.SIGSTOP)
    wait_for(lambda: lease_row(pg)[0] >= after_mark + 7, 30, "seven keepalives after the mark")
    counted = lease_row(pg)[0]
    ids_a += take(a.instance, 200)
    log(f"the lease ends at {counted:.1f} after seven keepalives; the server killed")
    pg.kill()
    pg.start()
    pg.wait_healthy()
    back = lease_row(pg)
    assert back and back[0] >= counted, \
        f"the lease came back ending at {back and back[0]:.1f}, before {counted:.1f}: " \
        "keepalives acknowledged and lost"
    # the holder renews on the server that came back, and is not halted
    wait_for(lambda: lease_row(pg)[0] > counted + 1, 30, "a keepalive after the restart")
    ids_a += take(a.instance, 200)
    b = Daemon(h, pg, instance=h.instance + "-b", name="b", args=ARGS).start(wait_ready=False)
    wait_for(lambda: "taken" in b.log_text() or "Waiting" in b.log_text(), 30,
             "the second daemon to find the number held")
    assert try_take(b.instance, 1, wait_ms=0) is None, "the second daemon serves the held number"
    ids_a += take(a.instance, 200)
    assert "restored" not in a.log_text(), a.log_text()[-2000:]
    # the holder gives the number up; the second takes it, above its mark
    assert a.stop() == 0
    b.wait_message("READY=1", 30)
    ids_b = take(b.instance, 200)
    check_unique_and_increasing([ids_a, ids_b])
    assert min(decode(i, 0)[0] for i in ids_b) > max(decode(i, 0)[0] for i in ids_a)
    assert b.stop() == 0


if __name__ == "__main__":
    harness.STORE = "postgres"
    run([test_keepalive_durable])
