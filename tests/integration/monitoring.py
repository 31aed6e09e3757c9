# SPDX-License-Identifier: MIT
"""The monitoring files in contrib/ against the metrics snowidd prints.

As a module: names_used() (every snowid_* name the alerting rules, their
unit tests and the Grafana dashboard use) and sample_names() (the names in a
/metrics body), for tests/integration/test_http.py, which compares them with
a live daemon's /metrics.

As a script (meson test monitoring-files): the same names against the
metric families that daemon/serve/http-metrics.c declares (its "# TYPE"
lines), none of them a deprecated one (its HELP says "Deprecated": a name
from before PostgreSQL, served beside its replacement for one release),
rate() and increase() only over counters, the dashboard's shape (a
Prometheus data source variable, an instance variable that every selector
uses), and, given promtool, every dashboard expression parsed by it."""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
RULES = os.path.join(ROOT, "contrib/prometheus/snowid.rules.yml")
RULES_TEST = os.path.join(ROOT, "contrib/prometheus/snowid.rules.test.yml")
DASHBOARD = os.path.join(ROOT, "contrib/grafana/snowid-dashboard.json")
METRICS_C = os.path.join(ROOT, "daemon/serve/http-metrics.c")

# a metric's name; not a C function (followed by "(") nor a pattern ("_*")
NAME = re.compile(r"\bsnowid_[a-z0-9_]*[a-z0-9](?![\w(*])")


def dashboard_exprs(dash=None, variables=True):
    """(panel title, expression) for every target, and every query variable's
    query (Grafana's label_values(), not PromQL) unless variables=False."""
    dash = dash or json.load(open(DASHBOARD))
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for v in dash["templating"]["list"]:
        if variables and v["type"] == "query":
            out.append((f"variable {v['name']}", v["query"]["query"]))
    return out


def names_used():
    """{file: set of snowid_* metric names it uses}. The rules files are read
    whole, annotations too: a runbook that names a metric names a real one."""
    used = {}
    for path in (RULES, RULES_TEST):
        with open(path) as f:
            used[path] = set(NAME.findall(f.read()))
    used[DASHBOARD] = {n for _, e in dashboard_exprs() for n in NAME.findall(e)}
    return used


def sample_names(body):
    """The metric names of the samples in a /metrics body."""
    return {re.split(r"[{ ]", line, 1)[0] for line in body.splitlines()
            if line and not line.startswith("#")}


def declared_families():
    """{family: type} from daemon/serve/http-metrics.c's "# TYPE" lines."""
    with open(METRICS_C) as f:
        return dict(re.findall(r"# TYPE (snowid_[a-z0-9_]+) (counter|gauge|histogram)", f.read()))


def deprecated_families():
    """{family: its replacement}, from the HELP lines that say "Deprecated"."""
    with open(METRICS_C) as f:
        text = f.read()
    return dict(re.findall(r'# HELP (snowid_[a-z0-9_]+) Deprecated: the same as '
                           r'(?:"\s*")?(snowid_[a-z0-9_]+)', text))


def sample_names_of(families):
    names = {}
    for fam, kind in families.items():
        if kind == "histogram":
            for s in ("_bucket", "_sum", "_count"):
                names[fam + s] = "counter"
        else:
            names[fam] = kind
    return names


def check_files(promtool=None):
    problems = []
    families = declared_families()
    assert len(families) > 30, f"only {len(families)} families found in daemon/serve/http-metrics.c"
    names = sample_names_of(families)
    deprecated = deprecated_families()
    assert deprecated, "no deprecated families found in daemon/serve/http-metrics.c"
    for old, new in deprecated.items():
        if families.get(old) != families.get(new):
            problems.append(f"{old} is a {families.get(old)}, its replacement {new} a "
                            f"{families.get(new)}")
    for path, used in names_used().items():
        assert used, f"no metric names found in {path}"
        for n in sorted(used - set(names) - set(families)):
            problems.append(f"{os.path.relpath(path, ROOT)}: {n} is not in "
                            "daemon/serve/http-metrics.c")
        for n in sorted(used):
            old = next((d for d in deprecated if n == d or n in sample_names_of(
                {d: families.get(d)})), None)
            if old:
                problems.append(f"{os.path.relpath(path, ROOT)}: {n} is deprecated; use "
                                f"{deprecated[old]}")

    # rate() and increase() are for counters (a histogram's buckets count too)
    with open(RULES) as f:
        rules_text = f.read()
    exprs = [("rules", e) for e in re.findall(r"^\s*expr: (.*)$", rules_text, re.M)]
    exprs += dashboard_exprs()
    assert len(exprs) > 20, exprs
    for where, e in exprs:
        for fn, n in re.findall(r"\b(rate|increase|irate)\((snowid_[a-z0-9_]+)", e):
            if names.get(n) != "counter":
                problems.append(f"{where}: {fn}() over {n}, a {names.get(n)}")
        for n in re.findall(r"histogram_quantile\([^,]+,.*?(snowid_[a-z0-9_]+)", e):
            if not n.endswith("_bucket"):
                problems.append(f"{where}: histogram_quantile over {n}")

    dash = json.load(open(DASHBOARD))
    if dash.get("schemaVersion", 0) < 36:
        problems.append(f"dashboard: schemaVersion {dash.get('schemaVersion')}")
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    ds = variables.get("datasource", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("dashboard: no Prometheus data source variable named datasource")
    inst = variables.get("instance", {})
    if inst.get("type") != "query" or "instance" not in inst.get("query", {}).get("query", ""):
        problems.append("dashboard: no query variable named instance")
    ids = [p["id"] for p in dash["panels"]]
    if len(ids) != len(set(ids)):
        problems.append(f"dashboard: panel ids repeat: {ids}")
    for p in dash["panels"]:
        if p["type"] == "row":
            continue
        if not p.get("targets"):
            problems.append(f"dashboard: panel {p['title']!r} has no query")
        for t in [p] + p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                problems.append(f"dashboard: {p['title']!r} does not use the datasource variable")
        for t in p.get("targets", []):
            # every selector of a snowid metric is limited to $instance
            for m in re.finditer(r"(snowid_[a-z0-9_]+)(\{[^}]*\})?", t["expr"]):
                if m.group(2) is None or 'instance=~"$instance"' not in m.group(2):
                    problems.append(f"dashboard: {p['title']!r}: {m.group(1)} without $instance")

    if promtool:
        # promtool has no "check expression": each one becomes a recording rule
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            rules = [{"record": f"check:expr{i}",
                      "expr": e.replace("$__rate_interval", "1m").replace("$instance", ".*")}
                     for i, (_, e) in enumerate(dashboard_exprs(dash, variables=False))]
            json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)  # JSON is YAML
            f.flush()
            r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
            if r.returncode != 0:
                problems.append("dashboard: promtool rejects an expression:\n" + r.stdout + r.stderr)
    return problems


if __name__ == "__main__":
    problems = check_files(sys.argv[1] if len(sys.argv) > 1 else None)
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    used = names_used()
    print(f"{sum(map(len, used.values()))} metric names used in {len(used)} files, "
          "all declared in daemon/serve/http-metrics.c")
