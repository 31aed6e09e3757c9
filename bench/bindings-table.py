#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bindings-table.py TSV MD DAT: the bindings benchmark's lines
(lang, row, threads, ns_per_id, ids_per_s; one line per run) into a Markdown
table (medians over runs, ratios to the same language's textbook generator
and to its HTTP client, measured in the same run) and a data file for
gnuplot.  MD "-": the table on standard output."""
import statistics
import sys
from collections import defaultdict

ORDER = ["snowid", "snowid-batch64", "textbook", "uuid", "http"]
TARGET = {"go": 1.5, "java": 1.2, "python": 1.2, "node": 1.2, "rust": 0.6}
# a binding over libsnowid against C through libsnowid, in the same run
TARGET_C = {"rust": 1.1}


def main(tsv, md, dat):
    runs = defaultdict(list)
    for line in open(tsv):
        f = line.rstrip("\n").split("\t")
        if len(f) < 4:
            continue
        try:
            runs[(f[0], f[1], int(f[2]))].append(float(f[3]))
        except ValueError:
            continue
    med = {k: statistics.median(v) for k, v in runs.items()}
    order = ["c", "go", "java", "python", "node", "rust"]
    langs = sorted({k[0] for k in med}, key=lambda x: order.index(x) if x in order else 9)
    out = ["| language | generator | ns/ID, 1 thread | ns/ID, 2 threads | runs | "
           "1 thread vs textbook | HTTP vs binding (1 thread) |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    verdicts = []
    for lang in langs:
        rows = sorted({k[1] for k in med if k[0] == lang},
                      key=lambda r: ORDER.index(r) if r in ORDER else len(ORDER))
        base = med.get((lang, "textbook", 1))
        http = med.get((lang, "http", 1))
        for r in rows:
            one, two = med.get((lang, r, 1)), med.get((lang, r, 2))
            n = len(runs.get((lang, r, 1), []))
            ratio = f"{one / base:.2f}x" if one and base else ""
            speed = f"{http / one:.0f}x" if one and http and r.startswith("snowid") else ""
            out.append(f"| {lang} | {r} | {one:.1f} | {two:.1f} | {n} | {ratio} | {speed} |"
                       if one and two else f"| {lang} | {r} | {one or 0:.1f} | | {n} | {ratio} | {speed} |")
        s = med.get((lang, "snowid", 1))
        if s and base:
            goal = TARGET.get(lang)
            verdicts.append(f"- {lang}: snowid {s / base:.2f}x the textbook generator"
                            + (f" (goal at most {goal}x: {'met' if s / base <= goal else 'NOT met'})"
                               if goal else "")
                            + (f"; {http / s:.0f}x faster than the HTTP API"
                               + f" (goal at least 20x: {'met' if http / s >= 20 else 'NOT met'})"
                               if http else ""))
        c = med.get(("c", "snowid", 1))
        if s and c and lang != "c":
            goal = TARGET_C.get(lang)
            verdicts.append(f"- {lang}: snowid {s / c:.2f}x C's snowid_next() through libsnowid"
                            + (f" (goal at most {goal}x: {'met' if s / c <= goal else 'NOT met'})"
                               if goal else ""))
    text = "\n".join(out) + "\n\n" + "\n".join(verdicts) + "\n"
    if md == "-":
        sys.stdout.write(text)
    else:
        with open(md, "w") as f:
            f.write(text)
    with open(dat, "w") as f:
        f.write("# lang snowid textbook uuid http (ns/ID, 1 thread, medians)\n")
        for lang in langs:
            vals = [med.get((lang, r, 1), float("nan")) for r in ("snowid", "textbook", "uuid", "http")]
            f.write(lang + " " + " ".join(f"{v:.2f}" for v in vals) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
