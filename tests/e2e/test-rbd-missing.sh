#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# backend=rbd: on a machine without librbd: the server refuses to start,
# before serving, saying what to install.  librbd is made unloadable in
# a mount namespace of the server's own (/dev/null bound over it); the
# rest of the machine keeps it.  No cluster is needed: the library is
# loaded before anything talks to Ceph.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires "$NBDKIT" --version
requires unshare --mount true
lib=$(ldconfig -p | awk '$1 == "librbd.so.1" { print $NF; exit }')
[ -n "$lib" ] || skip "librbd.so.1 is not installed"
lib=$(readlink -f "$lib")

mktempdir
spec=rbd:pool/image
status=0
timeout 120 unshare --mount --propagation private bash -c \
    'mount --bind /dev/null "$1" && shift && exec "$@"' _ "$lib" \
    "$NBDKIT" -f -U "$TESTDIR/sock" "$PLUGIN" backend="$spec" \
    >"$TESTDIR/out" 2>&1 || status=$?
cat "$TESTDIR/out"
[ "$status" -ne 0 ] || fail "the server started without librbd"
[ "$status" -ne 124 ] || fail "the server did not exit without librbd"
want="backend=$spec: the RBD backend needs librbd (Debian: apt-get install librbd1): "
grep -qF "$want" "$TESTDIR/out" || fail "expected the error '$want...'"
[ ! -e "$TESTDIR/sock" ] || fail "the server listened before failing"
[ -s "$lib" ] || fail "$lib was hidden outside the test's namespace"
echo "rbd-missing: ok"
