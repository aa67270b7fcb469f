#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the call graph between source files, read from the
# build's objects (tests/lint/callgraph.py): no call runs up a layer, no
# cycle goes through cache/engine/engine.c or spans two folders, at most three
# cycles in the tree (issue 34; invariant 7).
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"

requires nm --version
requires /usr/bin/python3 --version
/usr/bin/python3 "$abs_top_srcdir/tests/lint/callgraph.py" \
    "$abs_top_srcdir" "$abs_top_builddir" ||
    fail "the call graph breaks the layers: above"
