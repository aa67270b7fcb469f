#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Ceph's libraries are for backend=rbd: only (backend/rbd/rbd-lib.c loads
# them there): the plugin and discardfuse do not name librbd, librados
# or libceph-common as needed, directly (DT_NEEDED) or through another
# library (ldd), and a server of a file backend has none of them mapped.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires readelf --version
requires ldd --version
requires "$NBDKIT" --version

ceph='lib(rbd|rados|ceph-common)\.'
for f in "$PLUGIN" "$DISCARDFUSE"; do
    [ -e "$f" ] || fail "$f is missing (make builds it)"
    needed=$(readelf -d "$f" | grep NEEDED) || fail "readelf -d $f shows no NEEDED"
    ! grep -E "$ceph" <<<"$needed" ||
        fail "$f is linked with Ceph's libraries (DT_NEEDED above)"
    ! ldd "$f" | grep -E "$ceph" ||
        fail "$f loads Ceph's libraries at start (ldd above)"
done

mktempdir
truncate -s 64M "$TESTDIR/disk.img"
start_nbdkit -P "$TESTDIR/pid" -U "$TESTDIR/sock" "$PLUGIN" \
    backend="$TESTDIR/disk.img"
wait_started "$NBDKIT_PID" nbdkit 60 test -S "$TESTDIR/sock"
nbdinfo --size "nbd+unix:///?socket=$TESTDIR/sock" >/dev/null ||
    fail "cannot connect to the server"
! grep -E "/$ceph" "/proc/$NBDKIT_PID/maps" ||
    fail "a server of a file backend has Ceph's libraries mapped (above)"
echo "rbd-not-linked: ok"
