#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The host side of test-guest-restart-xfs.sh and -ext4.sh, one guest
# each so that `make -j2` runs them side by side (Debian 12's 6.1
# kernel, one vCPU): FS on /dev/nbd0 through `discardctl attach
# --connections=CONNECTIONS`, a writer that fsyncs, TERMS restarts of
# the server by SIGTERM and KILLS by kill -9: no error, each stop
# bounded, every file intact after each restart and at the end, fsck
# clean (tests/guest/restart-keeper.sh).
#
#   restart-host.sh FS CONNECTIONS TERMS KILLS
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
fs=$1 conns=$2 terms=$3 kills=$4
guest_test_setup
"$DISCARDCTL" attach 2>&1 | grep -q "built without netlink" &&
    fail "discardctl was built without netlink (libnl-genl-3-dev)"
guest_run --kernel 6.1 --timeout 1200 -- \
    "$abs_top_srcdir/tests/guest/restart-keeper.sh" "$terms" "$conns" "$fs" "$kills"
cat "$GOUT/restart-$fs.result"
