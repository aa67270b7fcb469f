#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardublk on a kernel without ublk (this host: no /dev/ublk-control):
# it must say what is missing and how to get it, exit 1, and leave
# nothing behind (no control socket, no statsfile, the backend untouched).
# Where the host has ublk, the guest test (tests/guest/test-guest-ublk.sh)
# covers the rest and this one skips.  Without liburing discardublk is not
# built: the test says so (a failure under CI=true).
source "$abs_top_srcdir/tests/functions.sh"
DISCARDUBLK=$abs_top_builddir/ublk/discardublk
[ -x "$DISCARDUBLK" ] ||
    skip "discardublk not built: configure found no liburing (apt-get install liburing-dev)"
[ ! -e /dev/ublk-control ] || skip "this kernel has ublk: nothing to check here"
mktempdir
truncate -s 64M "$TESTDIR/disk"
sum=$(md5sum < "$TESTDIR/disk")
status=0
"$DISCARDUBLK" backend="$TESTDIR/disk" ctl="$TESTDIR/ctl" \
    statsfile="$TESTDIR/stats.json" > "$TESTDIR/out" 2> "$TESTDIR/err" || status=$?
cat "$TESTDIR/err"
[ "$status" -eq 1 ] || fail "exit status $status, expected 1"
[ ! -s "$TESTDIR/out" ] || fail "printed '$(cat "$TESTDIR/out")' on stdout"
grep -q "/dev/ublk-control" "$TESTDIR/err" || fail "the message does not name /dev/ublk-control"
grep -q "modprobe ublk_drv" "$TESTDIR/err" || fail "the message does not say modprobe ublk_drv"
grep -q "Linux 6.0" "$TESTDIR/err" || fail "the message does not name the kernel it needs"
grep -q "CONFIG_BLK_DEV_UBLK" "$TESTDIR/err" || fail "the message does not name CONFIG_BLK_DEV_UBLK"
[ "$(wc -l < "$TESTDIR/err")" -eq 1 ] || fail "more than one message"
[ ! -e "$TESTDIR/ctl" ] || fail "a control socket was left behind"
[ ! -e "$TESTDIR/stats.json" ] || fail "a statsfile was written"
[ "$(md5sum < "$TESTDIR/disk")" = "$sum" ] || fail "the backend changed"
# --recover without --id is refused before anything else.
"$DISCARDUBLK" --recover backend="$TESTDIR/disk" 2> "$TESTDIR/err" && fail "--recover without --id succeeded"
grep -q -- "--recover needs --id" "$TESTDIR/err" || fail "no message for --recover without --id: $(cat "$TESTDIR/err")"
# An unknown key is named.
"$DISCARDUBLK" backend="$TESTDIR/disk" nosuchkey=1 2> "$TESTDIR/err" && fail "an unknown key was accepted"
grep -q "unknown parameter 'nosuchkey'" "$TESTDIR/err" || fail "unknown key not named: $(cat "$TESTDIR/err")"
echo "discardublk without ublk: refused with one clear message"
