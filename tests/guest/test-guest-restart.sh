#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# In a guest (Debian 12's 6.1 kernel, one vCPU): XFS on /dev/nbd0 through
# `discardctl attach --connections=2`, a writer that fsyncs, three
# restarts of the server by SIGTERM and one by kill -9; then ext4 through
# one connection, two SIGTERM and one kill -9: no error, each stop
# bounded, every file intact, fsck clean (tests/guest/restart-keeper.sh).
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
guest_test_setup
"$DISCARDCTL" attach 2>&1 | grep -q "built without netlink" &&
    fail "discardctl was built without netlink (libnl-genl-3-dev)"
guest_run --kernel 6.1 --timeout 600 -- /bin/bash -c \
    '"$1" 3 2 xfs && "$1" 2 1 ext4' - "$abs_top_srcdir/tests/guest/restart-keeper.sh"
cat "$GOUT/restart-xfs.result" "$GOUT/restart-ext4.result"
