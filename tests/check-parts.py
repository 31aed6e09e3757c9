#!/usr/bin/env python3
"""The daemon's parts keep their shape (docs/design.md, "The daemon's parts"):

- no .c file in daemon/ is over 700 lines;
- among the holder's headers, none includes another part's: each part's
  header (claim.h, cluster.h, ...) includes holder-int.h and no other
  header of holder/, so no include circle can form;
- the store's interface (store.h, store.c), the holder and serving name no
  etcd identifier or text outside comments: only the etcd backend speaks
  of etcd, and what serving still answers by an etcd name (the HTTP API's
  and the metrics' names from before PostgreSQL, deprecated and served
  beside their store_* names) is listed below;
- etcd.h and pg.h are included only inside store/;
- the holder asks the store by its verbs (store/verbs.h) only: it builds no
  request, sends none by store_call(), reads no answer's JSON (range.c,
  which reads a region's record, a value in its own JSON form, aside), and
  includes no txn.h (the transactions' pieces; the values it stores are
  values.h's); nor, through any header, store.h or jansson.h (range.c
  aside): it sees the store through store-api.h and verbs.h, and answers
  as struct store_answer.

Usage: check-parts.py SOURCE_ROOT
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
DAEMON = os.path.join(ROOT, "daemon")
MAX_LINES = 700

# names in the public API that say etcd, kept beside their store-neutral
# names for the clients and dashboards that use them (docs/operators.md,
# "Renamed: the store's metrics and states"); each is a whole string literal
# or a name
API_NAMES = re.compile(
    r'"(etcd-restored|etcd-full|etcd_reachable|etcd_full|etcd_error|etcd_error_message)"'
    r'|reason=\\"etcd-restored\\"|snowid_etcd_[a-z_]+')


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def files(where, exts=(".c", ".h")):
    for dirpath, _, names in os.walk(where):
        for n in sorted(names):
            if n.endswith(exts):
                yield os.path.join(dirpath, n)


def main():
    problems = []
    checked = 0

    for path in files(DAEMON, (".c",)):
        checked += 1
        n = sum(1 for _ in open(path, encoding="utf-8"))
        if n > MAX_LINES:
            problems.append(f"{os.path.relpath(path, ROOT)}: {n} lines (at most {MAX_LINES})")

    holder = os.path.join(DAEMON, "holder")
    own_headers = {n for n in os.listdir(holder) if n.endswith(".h")}
    for n in sorted(own_headers):
        if n in ("holder.h", "holder-int.h", "range.h"):
            continue
        checked += 1
        incs = re.findall(r'#include "([^"]+)"', open(os.path.join(holder, n)).read())
        others = [i for i in incs if i in own_headers and i != "holder-int.h"]
        if others:
            problems.append(f"daemon/holder/{n} includes {', '.join(others)}: a part's header "
                            "includes holder-int.h only")
    incs = re.findall(r'#include "([^"]+)"', open(os.path.join(holder, "holder-int.h")).read())
    bad = [i for i in incs if i in own_headers and i not in ("holder.h", "range.h")]
    if bad:
        problems.append(f"daemon/holder/holder-int.h includes {', '.join(bad)}")

    neutral = [os.path.join(DAEMON, "store", "store.h"), os.path.join(DAEMON, "store", "store.c")]
    neutral += list(files(holder)) + list(files(os.path.join(DAEMON, "serve")))
    for path in neutral:
        checked += 1
        code = API_NAMES.sub("", strip_comments(open(path, encoding="utf-8").read()))
        for i, line in enumerate(code.split("\n"), 1):
            # the store's chooser names the backends' tables, as it must
            if path.endswith("store.c") or path.endswith("store.h"):
                line = re.sub(r"store_etcd_ops", "", line)
            if re.search(r"etcd", line, re.I):
                problems.append(f"{os.path.relpath(path, ROOT)}:{i}: says etcd: {line.strip()}")

    for path in list(files(DAEMON)) + list(files(os.path.join(ROOT, "cli"))):
        if os.path.dirname(path) == os.path.join(DAEMON, "store"):
            continue
        checked += 1
        for inc in re.findall(r'#include "((?:etcd|pg|pg-int)\.h)"', open(path).read()):
            problems.append(f"{os.path.relpath(path, ROOT)} includes {inc}, private to store/")

    for path in files(holder):
        if '#include "txn.h"' in open(path, encoding="utf-8").read():
            problems.append(f"{os.path.relpath(path, ROOT)} includes txn.h, the transactions' "
                            "pieces: the holder asks by verbs")
    dirs = [os.path.join(DAEMON, d)
            for d in ("", "rules", "core", "store", "holder", "clock", "serve")]
    dirs += [os.path.join(ROOT, "shm"), os.path.join(ROOT, "libclient", "include")]

    def closure(path, seen):
        text = open(path, encoding="utf-8").read()
        for sys_inc in re.findall(r"#include <([^>]+)>", text):
            seen.add("<" + sys_inc + ">")
        for inc in re.findall(r'#include "([^"]+)"', text):
            if inc in seen:
                continue
            seen.add(inc)
            for d in [os.path.dirname(path)] + dirs:
                if os.path.exists(os.path.join(d, inc)):
                    closure(os.path.join(d, inc), seen)
                    break
        return seen

    for path in files(holder, (".c",)):
        if path.endswith("range.c"):
            continue
        seen = closure(path, set())
        for bad in ("store.h", "<jansson.h>", "txn.h", "etcd.h", "pg.h"):
            if bad in seen:
                problems.append(f"{os.path.relpath(path, ROOT)} includes {bad}, through its "
                                "headers: the holder sees store-api.h and verbs.h")
    for path in files(holder, (".c",)):
        if path.endswith("range.c"):
            continue
        checked += 1
        code = strip_comments(open(path, encoding="utf-8").read())
        for i, line in enumerate(code.split("\n"), 1):
            m = re.search(r"\b(json_\w+|txn_\w+|kv_\w+|store_call|store_ok)\b|\"/v3/", line)
            if m:
                problems.append(f"{os.path.relpath(path, ROOT)}:{i}: speaks the store's wire "
                                f"language ({m.group(0)}), not its verbs")

    # the holder's core is pure: through all its headers it includes no
    # event loop, store client, JSON or clock, and calls nothing that reads
    # a clock, draws at random, allocates, or logs
    core = os.path.join(DAEMON, "core")
    allowed_sys = {"<stdbool.h>", "<stdint.h>", "<stddef.h>", "<stdio.h>", "<string.h>",
                   "<inttypes.h>", "<limits.h>"}
    for path in files(core):
        checked += 1
        seen = closure(path, set())
        bad = sorted(i for i in seen if (i.startswith("<") and i not in allowed_sys)
                     or i in ("store.h", "store-api.h", "verbs.h", "log.h", "trace.h",
                              "holder.h", "holder-int.h", "config.h", "clock.h"))
        if bad:
            problems.append(f"{os.path.relpath(path, ROOT)} includes {', '.join(bad)}: the "
                            "core is pure, its driver does the I/O")
        code = strip_comments(open(path, encoding="utf-8").read())
        for i, line in enumerate(code.split("\n"), 1):
            m = re.search(r"\b(clock_gettime|time|random|rand|getpid|malloc|calloc|realloc|free|"
                          r"log_\w+|sd_\w+|curl_\w+|PQ\w+|json_\w+|printf|fprintf)\s*\(", line)
            if m:
                problems.append(f"{os.path.relpath(path, ROOT)}:{i}: calls {m.group(1)}: the core "
                                "reads no clock, draws from its own generator, allocates "
                                "nothing and logs nothing")

    for p in problems:
        print("FAIL", p)
    print(f"{checked} checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
