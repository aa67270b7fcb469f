#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""discardcache: the call graph between the product's source files, from
the build's objects (nm: who defines a symbol, who uses it), checked
against the layers (issue 34, invariant 7).

  callgraph.py SRCDIR BUILDDIR [--max-cycles N]

Fails (exit 1) when a call runs up a layer, when a cycle of files goes
through cache/engine/engine.c or spans two folders, or when there are more than
N cycles (default 3).  Prints every cycle with the calls that make it.
"""
import os
import subprocess
import sys

# Lowest first.  A file may call files of its own rank or below.
LAYERS = [
    ('common', 0), ('backend', 1), ('backend/rbd', 1),
    ('extmap', 2), ('cache/policy', 3), ('cache/protect', 3),
    ('cache/persist', 3), ('cache/engine', 4),
    ('volume', 5), ('volume/thin', 5), ('service', 6),
    ('nbd-plugin', 7), ('fuse', 7), ('ublk', 7), ('keeper', 7),
    ('tools', 7),
]
RANK = dict(LAYERS)


def source_of(src, build, obj):
    """The source file an object was compiled from, or None."""
    rel = os.path.relpath(obj, build)
    d = os.path.dirname(rel)
    if os.path.basename(d) == '.libs':
        d = os.path.dirname(d)
    if d not in RANK:
        return None
    base = os.path.basename(rel)[:-2]
    cands = [base]
    # A target with its own flags prefixes its objects (libfoo_la-x.o,
    # tools_discardctl-x.o).
    if '-' in base and '_' in base.split('-', 1)[0]:
        cands.append(base.split('-', 1)[1])
    for c in cands:
        p = os.path.join(d, c + '.c')
        if os.path.exists(os.path.join(src, p)):
            return p
    return None


def scan(src, build):
    defs, uses = {}, {}
    for d in RANK:
        top = os.path.join(build, d)
        for sub in (top, os.path.join(top, '.libs')):
            if not os.path.isdir(sub):
                continue
            for f in sorted(os.listdir(sub)):
                o = os.path.join(sub, f)
                if not f.endswith('.o') or '_small_' in f:
                    continue
                s = source_of(src, build, o)
                # An object older than its source is left from before a
                # move or an edit: the build has not remade it.
                if s is None or os.path.getmtime(o) < \
                        os.path.getmtime(os.path.join(src, s)):
                    continue
                out = subprocess.run(['nm', o], capture_output=True,
                                     text=True, check=True).stdout
                for line in out.splitlines():
                    parts = line.split()
                    if len(parts) == 3 and parts[1] in 'TDBR':
                        defs.setdefault(parts[2], set()).add(s)
                    elif len(parts) == 2 and parts[0] == 'U':
                        uses.setdefault(s, set()).add(parts[1])
    return defs, uses


def edges_of(defs, uses):
    """Calls between files.  The log (common/log.h's dc_error, dc_debug)
    is declared below everything and defined by whoever links the layers
    (nbd-plugin/log-nbdkit.c, common/log-stderr.c): a call to it is a
    call down, not into the front-end, so log-*.c are never targets.
    """
    edges = {}
    for s, syms in uses.items():
        for sym in syms:
            for t in defs.get(sym, ()):
                if t != s and not os.path.basename(t).startswith('log-'):
                    edges.setdefault(s, {}).setdefault(t, set()).add(sym)
    return edges


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    nodes = set(edges) | {t for v in edges.values() for t in v}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    args = sys.argv[1:]
    max_cycles = 3
    if '--max-cycles' in args:
        i = args.index('--max-cycles')
        max_cycles = int(args[i + 1])
        del args[i:i + 2]
    src, build = args
    defs, uses = scan(src, build)
    if not uses:
        print('callgraph: no objects found under %s: build first' % build)
        return 1
    edges = edges_of(defs, uses)
    bad = []
    for a in sorted(edges):
        for b, syms in sorted(edges[a].items()):
            ra, rb = RANK[os.path.dirname(a)], RANK[os.path.dirname(b)]
            if rb > ra:
                bad.append('upward call: %s -> %s (%s)'
                           % (a, b, ' '.join(sorted(syms))))
    found = cycles(edges)
    for c in found:
        print('cycle: ' + ' '.join(c))
        for a in c:
            for b, syms in sorted(edges.get(a, {}).items()):
                if b in c:
                    print('    %s -> %s: %s' % (a, b, ' '.join(sorted(syms))))
        if 'cache/engine/engine.c' in c:
            bad.append('a cycle goes through cache/engine/engine.c, the top of cache/')
        if len({os.path.dirname(f) for f in c}) > 1:
            bad.append('a cycle spans two folders: ' + ' '.join(c))
    if len(found) > max_cycles:
        bad.append('%d cycles, at most %d allowed' % (len(found), max_cycles))
    nfiles = len(set(uses) | {t for v in edges.values() for t in v})
    for b in bad:
        print('FAIL: ' + b)
    print('callgraph: %d files, %d calls between files, %d cycles (at most %d)'
          % (nfiles, sum(len(v) for v in edges.values()), len(found),
             max_cycles))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
