#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The card's line, told step by step, for `scripts/main-job --kernel`: on
# the host where the nbd module loads, or inside a guest
# (tests/guest/run) on an emulated SATA disk:
#
#   nbdkit discardcache backend=DEV ; nbd-client -u SOCKET /dev/nbd0 ;
#   mkfs.xfs ; mount -o discard ; churn ; fstrim ; discardctl flush --wait ;
#   discardctl stats ; umount ; nbd-client -d ; stop
#
#   card-main.sh DEV [IMAGE]     (IMAGE: the file behind DEV, for its size)
#   card-main.sh guest:KIND      inside a guest: its first disk of KIND
#
# Prints the statistics, the discards DEV completed (/proc/diskstats) and
# what IMAGE holds afterwards.  CHURN="ROUNDS FILES MAXKIB" sizes the churn.
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/card-lib.sh"

dev=$1 image=${2:-}
case $dev in
guest:*)
    source "$GUEST_LIB"
    guest_disks_load || fail "the disks did not appear"
    dev=$(guest_disk_of "${1#guest:}") || fail "no ${1#guest:} disk"
    image=$(guest_disk_file "$dev")
    echo "== in a guest: Debian's kernel $GUEST_KERNEL, $dev an emulated ${1#guest:} disk" \
         "(discard_granularity $(guest_queue "$dev" discard_granularity))" ;;
esac
read -r rounds files maxkib <<< "${CHURN:-12 80 4096}"
[ -e "$PLUGIN" ] || fail "$PLUGIN is missing: build first (make)"
requires nbd-client -V
requires mkfs.xfs -V
[ -b "$dev" ] || fail "$dev is not a block device"
mktempdir
CW=$TESTDIR

discards () { awk -v d="${1#/dev/}" '$3 == d { print $15, $17 }' /proc/diskstats; }

card_modules
echo "== nbdkit discardcache backend=$dev (the defaults), -U $CW/nbd.sock"
blkdiscard -f "$dev" > /dev/null 2>&1
read -r d0 s0 <<< "$(discards "$dev")"
card_server main "$dev" discardcache no
echo "== nbd-client -u $CW/nbd.sock $CARD_NBD"
card_attach "$CW/main.sock" 1
echo "== mkfs.xfs $CARD_NBD; mount -o discard"
card_mkfs xfs
card_mount discard
echo "== file churn ($rounds rounds of $files files up to $maxkib KiB, half deleted each round)"
start=$SECONDS
/usr/bin/python3 "$CHURN_PY" run "$CW/fs" "$CW/manifest" --seed 1 \
    --rounds "$rounds" --files "$files" --max-kib "$maxkib" || fail "churn failed"
/usr/bin/python3 "$CHURN_PY" verify "$CW/fs" "$CW/manifest" || fail "checksums differ"
echo "   churn took $(( SECONDS - start )) s"
echo "== fstrim"
fstrim -v "$CW/fs" || fail "fstrim failed"
echo "== discardctl flush --wait"
"$DISCARDCTL" -s "$CW/main.ctl" flush --wait || fail "discardctl flush --wait failed"
echo "== discardctl stats"
"$DISCARDCTL" -s "$CW/main.ctl" stats || fail "discardctl stats failed"
echo "== umount; nbd-client -d $CARD_NBD; stop the server"
umount "$CW/fs" || fail "umount failed"
card_detach || fail "nbd-client -d failed"
card_stop_server
read -r d1 s1 <<< "$(discards "$dev")"
echo
printf '  %-22s %s\n' "$dev completed" "$(( d1 - d0 )) discards, $(( (s1 - s0) / 2048 )) MiB (its /proc/diskstats)"
[ -z "$image" ] ||
    printf '  %-22s %s\n' "its image holds" "$(( $(stat -c %b "$image") * $(stat -c %B "$image") / 1048576 )) MiB afterwards"
