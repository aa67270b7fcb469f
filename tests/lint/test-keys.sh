#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the one table of keys (service/config.c, printed by
# tests/lint/keys-table) against everything that lists keys: the parsers
# (keys-table --check), `nbdkit discardcache --help`, `discardfuse
# --help`, `discardublk --help` (where it is built: its keys, and its own
# options against the OPTIONS of its man page, defaults included), the
# PARAMETERS of the plugin's and discardfuse's man pages (each key's
# forms, default, and whether discardctl set changes it), the README's
# table, and the lists of runtime keys in the man pages and the README.
# Any key or option missing, extra, or described differently fails,
# naming it.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 --version

KEYS_TABLE=$abs_top_builddir/tests/lint/keys-table
mktempdir
dir=$TESTDIR

# The parsers' own messages about the empty values it tries go to
# check.err, shown only if the check fails.
"$KEYS_TABLE" --check 2>"$dir/check.err" ||
    { cat "$dir/check.err" >&2; fail "the table disagrees with the parsers"; }
"$KEYS_TABLE" > "$dir/table" || fail "keys-table failed"
"$KEYS_TABLE" --help nbdkit > "$dir/help-nbdkit.want" || fail "keys-table --help nbdkit"
"$KEYS_TABLE" --help fuse > "$dir/help-fuse.want" || fail "keys-table --help fuse"
"$NBDKIT" "$PLUGIN" --help > "$dir/help-nbdkit" 2>&1 || fail "nbdkit --help failed"
"$DISCARDFUSE" --help > "$dir/help-fuse" 2>&1 || fail "discardfuse --help failed"
if [ -x "$DISCARDUBLK" ]; then
    "$KEYS_TABLE" --help ublk > "$dir/help-ublk.want" || fail "keys-table --help ublk"
    "$DISCARDUBLK" --help > "$dir/help-ublk" 2>&1 || fail "discardublk --help failed"
else
    echo "$0: discardublk not built (no liburing): its --help is not checked"
fi

/usr/bin/python3 - "$dir" "$abs_top_srcdir" <<'PY'
import os, re, sys

d, src = sys.argv[1], sys.argv[2]
problems = []

def problem(where, msg):
    problems.append("%s: %s" % (where, msg))

keys = []
for line in open(d + "/table"):
    name, forms, default, runtime, fronts, layer, help_ = line.rstrip("\n").split("\t")
    keys.append(dict(name=name, forms=forms, default=default,
                     runtime=runtime == "yes", fronts=fronts.split(","),
                     help=help_))
def keys_of(front):
    return [k for k in keys if front in k["fronts"]]

# --help: the front-end prints the table's text whole.
def check_help(front, got_file, start, end):
    want = open(d + "/help-%s.want" % front).read()
    got = open(d + "/" + got_file).read()
    i = got.find(start)
    j = got.find(end, i)
    if i < 0 or j < 0:
        problem(got_file, "no list of keys between %r and %r" % (start, end))
        return
    section = got[i + len(start):j]
    if section != want:
        problem(got_file, "the keys differ from the table:\n--- want\n%s--- got\n%s"
                % (want, section))
    listed = re.findall(r"^([a-z][a-z-]*)=", section, re.M)
    if listed != [k["name"] for k in keys_of(front)]:
        problem(got_file, "lists %s" % listed)
check_help("nbdkit", "help-nbdkit", "-plugin.so)\n", "See nbdkit-discardcache-plugin(1).")
check_help("fuse", "help-fuse", "Keys (also accepted as -o KEY=VALUE):\n", "\nSee discardfuse(1).")
ublk = os.path.exists(d + "/help-ublk")
if ublk:
    check_help("ublk", "help-ublk", "Keys:\n", "\nNeeds Linux")

def plain(pod):
    """Pod text without markup, whitespace made single spaces."""
    for _ in range(3):
        pod = re.sub(r"[BCFILS]<([^<>]*)>", lambda m: m.group(1).split("|")[-1]
                     if m.group(0).startswith("L<") else m.group(1), pod)
    return " ".join(pod.split())

def section(text, head):
    m = re.search(r"^=head1 %s\n(.*?)(?=^=head1 |\Z)" % head, text, re.M | re.S)
    return m.group(1) if m else ""

# Each man page: one =item per key in PARAMETERS, in the table's order,
# with its forms, its default and whether discardctl set changes it.
def check_pod(path, front):
    text = open(src + "/" + path).read()
    params = section(text, "PARAMETERS")
    items = re.findall(r"^=item ([^\n]*)\n(.*?)(?=^=item |^=back)", params, re.M | re.S)
    got = {}
    order = []
    for head, body in items:
        head = plain(head)
        m = re.match(r"^\[?([a-z][a-z-]*)=\]?(.*)$", head)
        if not m:
            continue
        order.append(m.group(1))
        got[m.group(1)] = (m.group(2), plain(body))
    want = keys_of(front)
    if order != [k["name"] for k in want]:
        problem(path, "PARAMETERS lists %s, the table %s"
                % (order, [k["name"] for k in want]))
    for k in want:
        if k["name"] not in got:
            continue
        forms, body = got[k["name"]]
        if forms != k["forms"]:
            problem(path, "%s=%s, the table says %s=%s"
                    % (k["name"], forms, k["name"], k["forms"]))
        if k["default"] == "required":
            if "Required" not in body or "Default:" in body:
                problem(path, "%s: should say it is required" % k["name"])
        elif "Default: %s." % k["default"] not in body:
            problem(path, "%s: lacks 'Default: %s.'" % (k["name"], k["default"]))
        if ("discardctl set" in body) != k["runtime"]:
            problem(path, "%s: %s say that discardctl set changes it"
                    % (k["name"], "should" if k["runtime"] else "should not"))
    return text

# discardublk's own options: --help's list (between the description and
# "Keys:") against its man page's OPTIONS, in order, each default the same.
def ublk_options():
    text = open(src + "/ublk/discardublk.pod").read()
    pod = []
    for head, body in re.findall(r"^=item ([^\n]*)\n(.*?)(?=^=item |^=back)",
                                 section(text, "OPTIONS"), re.M | re.S):
        m = re.search(r"[Dd]efault:? ([^.;)]+)", plain(body))
        pod.append((re.match(r"--[a-z-]+", plain(head)).group(0), m and m.group(1)))
    got = open(d + "/help-ublk").read()
    got = got[:got.find("\nKeys:\n")]
    helped = []
    for name, rest in re.findall(r"^  (--[a-z-]+)(.*(?:\n {6,}.*)*)", got, re.M):
        m = re.search(r"\(default:? ([^;)]+)", " ".join(rest.split()))
        helped.append((name, m and m.group(1)))
    if helped != pod:
        problem("help-ublk", "discardublk --help lists the options %s, its man page %s"
                % (helped, pod))
if ublk:
    ublk_options()

runtime = [k["name"] for k in keys if k["runtime"]]
def english(names, mark):
    names = [mark % n for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]

plugin = check_pod("nbd-plugin/nbdkit-discardcache-plugin.pod", "nbdkit")
check_pod("fuse/discardfuse.pod", "fuse")
for path, text, mark in [
        ("nbd-plugin/nbdkit-discardcache-plugin.pod", plugin, "C<%s>"),
        ("tools/discardctl.pod", open(src + "/tools/discardctl.pod").read(), "C<%s>"),
        ("README.md", open(src + "/README.md").read(), "%s")]:
    if english(runtime, mark) not in " ".join(text.split()):
        problem(path, "does not list the runtime keys as '%s'" % english(runtime, mark))

# README: the table of keys.
readme = open(src + "/README.md").read()
m = re.search(r"^\| key \| default \| discardctl set \|\n\|[- |]*\|\n((?:\|.*\|\n)+)",
              readme, re.M)
if not m:
    problem("README.md", "no table of keys ('| key | default | discardctl set |')")
else:
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip().replace("\\|", "|") for c in
                 re.split(r"(?<!\\)\|", line)[1:-1]]
        rows.append(cells)
    want = [["`%s=%s`" % (k["name"], k["forms"]), k["default"],
             "yes" if k["runtime"] else "no"] for k in keys]
    if rows != want:
        for r in rows:
            if r not in want:
                problem("README.md", "row %s is not in the table" % r)
        for w in want:
            if w not in rows:
                problem("README.md", "lacks the row %s" % w)
        if sorted(map(str, rows)) == sorted(map(str, want)):
            problem("README.md", "the rows are not in the table's order")

if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
print("keys: %d keys agree in --help (nbdkit, discardfuse%s), the man pages "
      "and the README; runtime keys: %s"
      % (len(keys), ", discardublk and its options" if ublk else "", ", ".join(runtime)))
PY
