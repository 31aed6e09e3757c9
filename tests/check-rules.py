#!/usr/bin/env python3
"""The rules and the model name the same decisions (daemon/rules/rules.h):

- every decision rules.h declares (rule<N>_<name>) is named in
  model/snowid.pml, as "rules: <name>" at the step that makes it, or in its
  list of decisions "not made here", and in docs/fences.md;
- every name the model gives is one rules.h declares;
- every mutant rules.c has (SNOWID_MUTANT == k or != k) is a mutant of the
  model (MUTANT == k or != k), and is built into a test that must fail
  (tests/meson.build's rules_mutants), and that list has no other number;
- every mutant the pure cores' tests are built with (tests/meson.build's
  core_tests) is the model's, and is in rules.c or daemon/core/; every
  mutant in daemon/core/ is built into a core's tests;
- every decision the model notes for its replay ("@rule..." printed) is
  one rules.h declares and one model/replay.c replays in the model's shape,
  and every one model/replay.c replays so is noted by the model;
- rules.c notes every decision rules.h declares but rule3_mark (a part of
  the claim start) for a trace, and model/replay.c replays each in the
  code's shape;
- daemon/rules/ includes nothing but the C library's pure headers, its own,
  and the plain data of cluster-ident.h, reads.h and snowid.h.

Usage: check-rules.py SOURCE_ROOT
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")


def read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def main():
    problems = []
    header, rules = read("daemon", "rules", "rules.h"), read("daemon", "rules", "rules.c")
    model, fences = read("model", "snowid.pml"), read("docs", "fences.md")
    meson = read("tests", "meson.build")

    declared = set(re.findall(r"^[a-z][a-z0-9_ ]*?\b(rule[0-9]+_[a-z0-9_]+)\(", header, re.M))
    if not declared:
        problems.append("rules.h declares no rule")
    flat = re.sub(r"\s*\n\s*\*\s*", " ", model)  # comments joined across lines
    named = set(re.findall(r"rules: ((?:rule[0-9]+_[a-z0-9_]+(?:, )?)+)", flat))
    named = {n for group in named for n in group.split(", ") if n}
    unmade = re.search(r"rules not made here: (.*?)\.\s", flat, re.S)
    not_made = set(re.findall(r"(rule[0-9]+_[a-z0-9_]+) \(", unmade.group(1))) if unmade else set()
    for name in sorted(declared):
        if name not in named and name not in not_made:
            problems.append(f"{name}: rules.h declares it, model/snowid.pml names it nowhere")
        if name not in fences:
            problems.append(f"{name}: not in docs/fences.md")
    for name in sorted((named | not_made) - declared):
        problems.append(f"{name}: model/snowid.pml names it, rules.h does not declare it")

    code_mutants = {int(k) for k in re.findall(r"SNOWID_MUTANT [!=]= ([0-9]+)", rules)}
    model_mutants = {int(k) for k in re.findall(r"\bMUTANT [!=]= ([0-9]+)", model)}
    built = re.search(r"rules_mutants = \[([0-9, ]*)\]", meson)
    built = {int(k) for k in re.findall(r"[0-9]+", built.group(1))} if built else set()
    for k in sorted(code_mutants - model_mutants):
        problems.append(f"mutant {k}: in rules.c, not in model/snowid.pml")
    for k in sorted(code_mutants ^ built):
        where = "rules.c" if k in code_mutants else "tests/meson.build"
        problems.append(f"mutant {k}: only in {where} (rules.c's and rules_mutants must agree)")

    # the pure cores' tests, built with mutants: each a model's mutant, and
    # each mutant a core's code has is built into its tests
    core_lists = re.search(r"core_tests = \{(.*?)\}", meson, re.S)
    core_built = {int(k) for k in re.findall(r"[0-9]+", core_lists.group(1))} if core_lists else set()
    if not core_lists:
        problems.append("tests/meson.build: no core_tests")
    core_dir = os.path.join(ROOT, "daemon", "core")
    core_code = "".join(read("daemon", "core", n) for n in sorted(os.listdir(core_dir))
                        if n.endswith(".c"))
    own = {int(k) for k in re.findall(r"SNOWID_MUTANT [!=]= ([0-9]+)", core_code)}
    for k in sorted(core_built - model_mutants):
        problems.append(f"mutant {k}: built into a core's tests, not in model/snowid.pml")
    for k in sorted(own - core_built):
        problems.append(f"mutant {k}: in daemon/core/, built into no core's tests")
    for k in sorted(core_built - own - code_mutants):
        problems.append(f"mutant {k}: built into a core's tests, in neither rules.c nor daemon/core/")

    noted = set(re.findall(r'[":]@(rule[0-9]+_[a-z0-9_]+) ', model))
    shapes = re.findall(r'\{"(rule[0-9]+_[a-z0-9_]+)", [0-9]+, d_[a-z0-9_]+, (MODEL|CODE|BOTH)\}',
                        read("model", "replay.c"))
    replayed = {n for n, by in shapes if by != "CODE"}
    code_replayed = {n for n, by in shapes if by != "MODEL"}
    traced = set(re.findall(r'NOTE\("(rule[0-9]+_[a-z0-9_]+)"', rules))
    for name in sorted(declared - {"rule3_mark"} - traced):
        problems.append(f"{name}: rules.c does not note it for a trace")
    for name in sorted(traced ^ code_replayed):
        where = "rules.c notes" if name in traced else "model/replay.c replays"
        problems.append(f"{name}: only {where} it in the code's shape (the two must agree)")
    if not noted:
        problems.append("model/snowid.pml notes no decision for model/replay.c")
    for name in sorted(noted - declared):
        problems.append(f"{name}: model/snowid.pml notes it, rules.h does not declare it")
    for name in sorted(noted ^ replayed):
        where = "model/snowid.pml notes" if name in noted else "model/replay.c replays"
        problems.append(f"{name}: only {where} it (the two must agree)")

    folder = os.path.join(ROOT, "daemon", "rules")
    for name in sorted(os.listdir(folder)):
        for inc in re.findall(r'#include [<"]([^>"]+)[>"]', read("daemon", "rules", name)):
            if inc not in ("stdbool.h", "stdint.h", "string.h", "rules.h", "choose.h", "verdict.h", "schedule.h",
                           "cluster-ident.h", "reads.h", "snowid.h"):
                problems.append(f"rules/{name}: includes {inc}, which is not pure")

    for p in problems:
        print(f"check-rules: {p}", file=sys.stderr)
    print(f"check-rules: {len(declared)} decisions ({len(noted)} replayed from the model, {len(traced)} "
          f"from traces), {len(code_mutants)} mutants; "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
