#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest (tests/guest/run): the card's line on the first disk
# of KIND, with XFS and with ext4, each against passthrough=true on the
# same churn, then nbdkit's own file plugin.
#
#   card-disk.sh KIND [--workload SPEC] [--ext4-passthrough] [--file] [--all]
#
# XFS runs against passthrough=true always, ext4 only with
# --ext4-passthrough; --file adds nbdkit's file plugin (--all: both).
# SPEC: card_line's --workload.  Checks, per file system: every file
# intact after detach, stop, restart, attach (and fsck clean); every discard the disk got honours
# its discard_granularity and discard_max_bytes; the disk completed at
# most half the discards it completed with passthrough=true; the image
# holds no more than with passthrough=true (+ 4 MiB).  On a disk without
# write-zeroes (SATA) nbdkit's file plugin is checked to send the disk no
# discard at all (what README.md and docs/design-notes.md say).
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"
source "$abs_top_srcdir/tests/guest/card-lib.sh"

kind=$1
shift
workload=churn:6:40:1024 ext4_pt=false file=false
while [ $# -gt 0 ]; do
    case $1 in
    --workload) workload=$2; shift ;;
    --ext4-passthrough) ext4_pt=true ;;
    --file) file=true ;;
    --all) ext4_pt=true file=true ;;
    *) fail "unknown option $1" ;;
    esac
    shift
done
[ -e "$PLUGIN" ] || fail "$PLUGIN is missing: build first"
requires nbd-client -V
requires mkfs.xfs -V
requires mkfs.ext4 -V
guest_disks_load || fail "the disks did not appear"
dev=$(guest_disk_of "$kind") || fail "no $kind disk"
echo "$kind: $dev, discard_granularity $(guest_queue "$dev" discard_granularity)," \
     "discard_max_bytes $(guest_queue "$dev" discard_max_bytes)," \
     "write_zeroes_max_bytes $(guest_queue "$dev" write_zeroes_max_bytes), kernel $GUEST_KERNEL"

for fs in xfs ext4; do
    pt=$kind-$fs-passthrough dc=$kind-$fs-discardcache
    [ "$fs" = xfs ] || $ext4_pt || pt=
    [ -z "$pt" ] || card_line "$pt" "$dev" "$fs" passthrough --trace --workload "$workload"
    card_line "$dc" "$dev" "$fs" discardcache --trace --restart --workload "$workload"
    [ "$(card_get "$dc" verified)" -gt 0 ] || fail "$kind $fs: no file verified"
    [ -n "$pt" ] || continue
    p=$(card_get "$pt" discards) d=$(card_get "$dc" discards)
    pi=$(card_get "$pt" image_bytes) di=$(card_get "$dc" image_bytes)
    echo "$kind $fs: the disk completed $d discards with discardcache, $p with passthrough=true;" \
         "image $(( di / 1048576 )) MiB against $(( pi / 1048576 )) MiB"
    [ "$p" -gt 0 ] || fail "$kind $fs: passthrough=true sent the disk no discard"
    (( d * 2 <= p )) || fail "$kind $fs: $d discards is more than half of passthrough's $p"
    (( di <= pi + 4194304 )) ||
        fail "$kind $fs: the image holds $di bytes, passthrough left $pi: space not given back"
done

$file || exit 0
card_line "$kind-xfs-file" "$dev" xfs file --workload "$workload"
f=$(card_get "$kind-xfs-file" discards)
echo "$kind: nbdkit's file plugin ($(nbdkit --version)) sent the disk $f discards;" \
     "the image holds $(( $(card_get "$kind-xfs-file" image_bytes) / 1048576 )) MiB"
if [ "$(guest_queue "$dev" write_zeroes_max_bytes)" = 0 ]; then
    [ "$f" -eq 0 ] ||
        fail "nbdkit file sent a disk without write-zeroes $f discards: the docs say none"
fi
