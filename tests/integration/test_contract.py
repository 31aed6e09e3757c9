# SPDX-License-Identifier: MIT
"""The store's contract (docs/design.md, "The store's verbs") on a real
store: build/tests/snowid-store-contract calls each verb as the holder does
and checks what the verb must guarantee, against etcd, or PostgreSQL with
SNOWID_STORE=postgres."""
import os
import subprocess

from harness import BUILD, Store, log, run, store_args

CONTRACT = os.path.join(BUILD, "tests", "snowid-store-contract")


def test_contract(h):
    store = Store(h)
    r = subprocess.run([CONTRACT, "--config", "/dev/null", *store_args(store),
                        "--cluster", f"contract{os.getpid()}", "--time-bits", "48", "--worker-bits", "3",
                        "--seq-bits", "12"],
                       capture_output=True, text=True, timeout=120)
    for line in r.stdout.splitlines():
        log(line)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stdout[-3000:]} {r.stderr[-2000:]}"
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and int(last.split()[0]) >= 25, last


if __name__ == "__main__":
    run([test_contract])
