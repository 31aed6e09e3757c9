#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The man pages against the code they describe.

  (a) every symbol of SNOWID_1.0 and SNOWID_1.1 in libsnowid.map is named in
      the NAME section of a section-3 page, and `meson install` puts a page
      or a link under its own name (man3/<symbol>.3); every name a section-3
      page lists is such a symbol;
  (b) every long option `snowidd --help` prints is a setting of
      snowidd.conf(5) (with the default --help states), except --config,
      --check-config, --prepare-runtime-dir and --help, which snowidd(8)
      describes;
  (c) every command of `snowid --help` has its section in snowid(1), and
      every long option of `snowid COMMAND --help` appears there;
  (d) every page renders without a warning (man --warnings, else groff -ww).

Usage: check-man-pages.py MAP SNOWIDD SNOWID BUILD_ROOT PAGE...
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []
counts = {}


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def text_of(roff):
    """A line of roff as plain text: font changes and escapes dropped."""
    s = re.sub(r"\\f(\(..|\[[^]]*\]|.)", "", roff)
    s = s.replace("\\&", "").replace("\\(aq", "'").replace("\\*(Aq", "'")
    s = s.replace("\\-", "-").replace("\\e", "\\").replace("\\ ", " ")
    return s


def read_page(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def name_section(lines):
    """The names a page's NAME section lists (before its ' - ')."""
    out, inside = [], False
    for line in lines:
        if line.startswith(".SH"):
            if inside:
                break
            inside = line.split(None, 1)[1].strip('"') == "NAME" if " " in line else False
            continue
        if inside and not line.startswith("."):
            out.append(text_of(line))
    head = " ".join(out).split(" - ", 1)[0]
    return [n.strip() for n in head.split(",") if n.strip()]


def entries(lines):
    """Definition-list entries, as scdoc writes them: a term line followed by
    .RS 4, its text up to .RE.  Yields (term roff line, entry plain text)."""
    for i, line in enumerate(lines[:-1]):
        if lines[i + 1] == ".RS 4" and not line.startswith("."):
            body = []
            for b in lines[i + 2:]:
                if b == ".RE":
                    break
                if not b.startswith("."):
                    body.append(text_of(b))
            yield line, " ".join([text_of(line)] + body)


def exported_symbols(map_path):
    """The global symbols of the SNOWID_1.0 and SNOWID_1.1 nodes."""
    text = re.sub(r"/\*.*?\*/", "", open(map_path).read(), flags=re.S)
    syms = {}
    for node, body in re.findall(r"(SNOWID_[0-9A-Z_.]+)\s*\{(.*?)\}", text, flags=re.S):
        if node not in ("SNOWID_1.0", "SNOWID_1.1"):
            continue
        glob = re.split(r"\blocal\s*:", body)[0]
        glob = re.sub(r"\bglobal\s*:", "", glob)
        for s in glob.split(";"):
            s = s.strip()
            if s:
                syms[s] = node
    return syms


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return r.stdout + r.stderr


def help_entries(help_text):
    """`snowidd --help`'s entries: (the options it names, its whole text)."""
    out, cur = [], None
    for line in help_text.splitlines():
        if re.match(r"^\s{1,3}--", line):
            cur = [line]
            out.append(cur)
        elif cur is not None and re.match(r"^\s{4,}\S", line):
            cur.append(line)
        else:
            cur = None
    for e in out:
        text = " ".join(x.strip() for x in e)
        # the options are those before the description (two spaces apart)
        opts = re.findall(r"--([a-z][a-z0-9-]*)", re.split(r"\S\s{2,}", e[0].strip(), 1)[0])
        yield opts, text


def check_symbols(map_path, pages, build_root):
    syms = exported_symbols(map_path)
    if len(syms) < 10:
        fail("read only %d symbols from %s" % (len(syms), map_path))
    listed = {}
    for p in pages:
        if p.endswith(".3") and os.path.basename(p) != "libsnowid.3":
            for n in name_section(read_page(p)):
                listed[n] = p
    counts["symbols"] = len(syms)
    for s, node in sorted(syms.items()):
        if s not in listed:
            fail("%s (%s) is named in no section-3 page's NAME" % (s, node))
    for n, p in sorted(listed.items()):
        if n not in syms:
            fail("%s lists %s, which libsnowid.map does not export (SNOWID_1.0/1.1)"
                 % (os.path.basename(p), n))

    # each symbol under its own name, as installed (a page or a link)
    meson = shutil.which("meson")
    if not meson:
        print("note: no meson in PATH: the installed names are not checked")
        return
    with tempfile.TemporaryDirectory() as dest:
        r = subprocess.run([meson, "install", "-C", build_root, "--no-rebuild", "--quiet",
                            "--tags", "man", "--destdir", dest],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            fail("meson install --tags man failed:\n" + r.stdout)
            return
        man3 = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs
                if os.path.basename(d) == "man3"]
        by_name = {os.path.basename(f): f for f in man3}
        counts["installed man3 names"] = len(by_name)
        for s in sorted(syms):
            f = by_name.get(s + ".3")
            if not f:
                fail("no man3/%s.3 installed (a page or a link)" % s)
            elif not os.path.exists(f):
                fail("man3/%s.3 is a dangling link (to %s)" % (s, os.readlink(f)))
            elif s not in name_section(read_page(f)):
                fail("man3/%s.3 leads to a page whose NAME does not list %s" % (s, s))


def check_snowidd(snowidd, conf_page, daemon_page):
    help_text = run([snowidd, "--help"])
    options = set(re.findall(r"--([a-z][a-z-]*)", help_text))
    if len(options) < 30:
        fail("snowidd --help lists only %d options:\n%s" % (len(options), help_text))
    own = {"config", "check-config", "prepare-runtime-dir", "help"}
    conf = read_page(conf_page)
    settings = {}
    for term, text in entries(conf):
        for name in re.findall(r"\\fB([a-z][a-z0-9-]*)\\fR = ", term):
            settings[name] = text
    counts["settings"] = len(options - own)
    for o in sorted(options - own):
        if o not in settings:
            fail("snowidd --%s is not a setting in snowidd.conf(5)" % o)
    daemon = "\n".join(read_page(daemon_page))
    for o in sorted(own):
        if "\\fB--%s\\fR" % o not in daemon:
            fail("snowidd --%s is not described in snowidd(8)" % o)
    # the defaults --help states are the pages'
    for opts, text in help_entries(help_text):
        m = re.search(r"default ([^\s;)]+)[;)]", text)
        if not m or not opts or opts[0] in own or opts[0] not in settings:
            continue
        want = m.group(1)
        counts["defaults"] = counts.get("defaults", 0) + 1
        if not re.search(r"Default: " + re.escape(want) + r"(?=[\s;,)]|\.(\s|$)|$)",
                         settings[opts[0]]):
            fail("snowidd.conf(5) does not give %s's default as %s (snowidd --help)"
                 % (opts[0], want))


def check_snowid(snowid, page):
    help_text = run([snowid, "--help"])
    commands = re.findall(r"^  ([a-z]+)\s{2,}", help_text, flags=re.M)
    if len(commands) < 3:
        fail("snowid --help lists only %s" % commands)
    lines = read_page(page)
    text = "\n".join(lines)
    sections = {text_of(l.split(None, 1)[1]).strip('"') for l in lines
                if l.startswith(".SS ")}
    counts["commands"] = len(commands)
    for c in commands:
        if c not in sections:
            fail("snowid %s has no section in snowid(1)" % c)
        for o in sorted(set(re.findall(r"--([a-z][a-z0-9-]*)", run([snowid, c, "--help"])))):
            if "\\fB--%s\\fR" % o not in text:
                fail("snowid %s --%s is not in snowid(1)" % (c, o))


def check_render(pages):
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat")
    man, groff = shutil.which("man"), shutil.which("groff")
    if not man and not groff:
        print("note: neither man nor groff: rendering not checked")
        return
    for p in pages:
        if man:
            cmd = [man, "--warnings", "-E", "UTF-8", "-l", p]
        else:
            cmd = [groff, "-t", "-man", "-Tutf8", "-ww", "-z", p]
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode != 0 or r.stderr.strip():
            fail("%s renders with warnings (%s):\n%s" % (os.path.basename(p), cmd[0],
                                                           r.stderr))
        elif man and "NAME" not in r.stdout:
            fail("%s rendered to no NAME section" % os.path.basename(p))


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    map_path, snowidd, snowid, build_root = sys.argv[1:5]
    pages = sys.argv[5:]
    by_name = {os.path.basename(p): p for p in pages}
    for need in ("snowidd.8", "snowidd.conf.5", "snowid.1", "libsnowid.3"):
        if need not in by_name:
            fail("no page %s among %s" % (need, sorted(by_name)))
    if failures:
        sys.exit(1)
    check_symbols(map_path, pages, build_root)
    check_snowidd(snowidd, by_name["snowidd.conf.5"], by_name["snowidd.8"])
    check_snowid(snowid, by_name["snowid.1"])
    check_render(pages)
    if failures:
        print("%d problem(s)" % len(failures))
        sys.exit(1)
    print("ok: %d pages; " % len(pages) + ", ".join("%d %s" % (v, k) for k, v in counts.items()))


if __name__ == "__main__":
    main()
