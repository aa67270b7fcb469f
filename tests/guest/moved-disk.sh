#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest (tests/guest/run), for test-guest-moved.sh: the state
# file follows a SATA disk to another position (issue 35, item 4).
#
#   moved-disk.sh save    the disk of serial dc-moved is /dev/sda: trims
#                         pending, a clean stop saves them to $GUEST_OUT
#   moved-disk.sh load    the same disk is /dev/sdb now, behind dc-other:
#                         the pending set is loaded whole; then the other
#                         disk, at the first position, is refused
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"

step=$1
state=$GUEST_OUT/state
mktempdir
W=$TESTDIR
guest_disks_load || fail "the disks did not appear"
moved=$(guest_disk dc-moved) || fail "no disk of serial dc-moved"

# start_dc NAME DEV: the plugin on DEV with state=$state.
start_dc ()
{
    start_nbdkit -P "$W/$1.pid" -U "$W/$1.sock" "$PLUGIN" backend="$2" \
        state="$state" journal=off delay=1h ctl="$W/$1.ctl" 2>"$W/$1.log" ||
        { cat "$W/$1.log"; fail "nbdkit on $2 did not start"; }
    wait_for_ctl "$W/$1.ctl"
}
stop_dc () { stop_pidfile "$W/$1.pid" nbdkit; }

# rescan_in_order SERIAL...: delete the disks of these serials, then scan
# their SCSI hosts back one at a time, each disk there before the next
# scan, so that they take sda, sdb, ... in this order.
rescan_in_order ()
{
    local serial dev host hosts=() i
    for serial in "$@"; do
        dev=$(guest_disk "$serial") || fail "no disk of serial $serial"
        host=$(readlink -f "/sys/block/${dev#/dev/}/device")
        host=${host%/target*}
        hosts+=("${host##*/}")
        echo 1 >"/sys/block/${dev#/dev/}/device/delete" || fail "cannot delete $dev"
    done
    for (( i = 0; i < ${#hosts[@]}; i++ )); do
        echo "- - -" >"/sys/class/scsi_host/${hosts[i]}/scan" ||
            fail "cannot scan ${hosts[i]}"
        wait_for_disk "${@:i+1:1}"
    done
}

# wait_for_disk SERIAL: until the disk of that serial is there (10 s).
wait_for_disk ()
{
    local t
    for (( t = 0; t < 100; t++ )); do
        guest_disk "$1" >/dev/null && return 0
        sleep 0.1
    done
    fail "the disk of serial $1 did not come back"
}
dump () { "$DISCARDCTL" -s "$W/$1.ctl" dump | cut -d' ' -f1,2; }

case $step in
save)
    [ "$moved" = /dev/sda ] || fail "dc-moved is $moved, expected /dev/sda"
    start_dc a "$moved"
    /usr/bin/python3 - "$W/a.sock" <<'PY' || fail "the client failed"
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
for i in range(16):
    h.trim(1 << 20, i * (4 << 20))
h.shutdown()
PY
    dump a >"$GUEST_OUT/saved.pending"
    [ "$(wc -l <"$GUEST_OUT/saved.pending")" -eq 16 ] || fail "expected 16 pending extents"
    grep -o "block device [0-9:]* ([^)]*)" "$W/a.log" || true
    stop_dc a
    [ -s "$state" ] || fail "no state file after a clean stop"
    echo "saved 16 pending extents for $moved"
    ;;
load)
    # The kernel probes SATA ports in parallel, so which disk is sda is
    # up to chance: take both away and scan dc-other's port first.
    rescan_in_order dc-other dc-moved
    moved=$(guest_disk dc-moved) || fail "no disk of serial dc-moved"
    other=$(guest_disk dc-other) || fail "no disk of serial dc-other"
    [ "$moved" = /dev/sdb ] && [ "$other" = /dev/sda ] ||
        fail "dc-moved is $moved and dc-other $other, expected /dev/sdb and /dev/sda"
    start_dc b "$moved"
    dump b >"$W/b.pending"
    cmp -s "$GUEST_OUT/saved.pending" "$W/b.pending" ||
        fail "the pending set did not follow the disk from /dev/sda to $moved"
    stop_dc b
    echo "loaded the 16 pending extents at $moved"
    start_dc c "$other"
    grep "refused, nothing applied: " "$W/c.log" |
        grep -qF "saved for another blkdev (wwid:" ||
        { cat "$W/c.log"; fail "the state of dc-moved was not refused for dc-other"; }
    [ "$(ctl_stat "$W/c.ctl" pending_extents)" -eq 0 ] ||
        fail "dc-other got dc-moved's pending set"
    stop_dc c
    echo "refused for the other disk at /dev/sda"
    ;;
*) fail "usage: moved-disk.sh save|load" ;;
esac
