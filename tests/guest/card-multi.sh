#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest (tests/guest/run, 2 vCPUs or more, two SATA disks):
#
# 1. The card's line with `nbd-client -C 4` on the first disk, XFS, a
#    churn on each vCPU: the writes used more than one connection (nbdkit's log filter says
#    which), every file intact after a restart, fsck clean.
# 2. The project's verifier (tests/verifier/) through the kernel client:
#    verify -> qemu-nbd (--cache=none: O_DIRECT on /dev/nbd0; its
#    discards are BLKDISCARD) -> /dev/nbd0 -> nbdkit discardcache ->
#    the second (small) disk.  Its random writes, trims, zeroes, flushes
#    and reads are checked against its model of every block, then
#    discardctl flush --wait, detach, stop, start again, attach, and
#    every block checked once more: no discard landed on data written
#    after it.
#
#   card-multi.sh [--workload SPEC] [--ops N]
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"
source "$abs_top_srcdir/tests/guest/card-lib.sh"

workload=pchurn:4:30:1024 ops=3000
while [ $# -gt 0 ]; do
    case $1 in
    --workload) workload=$2; shift ;;
    --ops) ops=$2; shift ;;
    *) fail "unknown option $1" ;;
    esac
    shift
done
VERIFY=$abs_top_builddir/tests/verifier/verify
[ -e "$PLUGIN" ] || fail "$PLUGIN is missing: build first"
[ -x "$VERIFY" ] || fail "$VERIFY is missing: build first (make check)"
requires nbd-client -V
requires qemu-nbd --version
[ "$(nproc)" -ge 2 ] || fail "the guest has $(nproc) vCPU: multi-connection needs 2 (run --smp 2)"
guest_disks_load || fail "the disks did not appear"
dev=$(guest_disk_of sata 0) || fail "no first SATA disk"
vdev=$(guest_disk_of sata 1) || fail "no second SATA disk"

# 1. Four connections.
card_line sata-xfs-c4 "$dev" xfs discardcache --conns 4 --restart --workload "$workload"
used=$(card_get sata-xfs-c4 conns_used)
echo "nbd-client -C 4 on $(nproc) vCPUs: the writes used $used connections"
[ "$used" -gt 1 ] || fail "with -C 4 and $(nproc) vCPUs the writes used $used connection(s)"

# 2. The verifier through /dev/nbd0.
CW=$(mktemp -d /tmp/verify.XXXXXX)
seed=${VERIFY_SEED:-$(( $(date +%s) % 100000 ))}
echo "== verifier: verify -> qemu-nbd -> $CARD_NBD -> discardcache -> $vdev (seed $seed)"
blkdiscard -f "$vdev" > /dev/null 2>&1
card_modules

card_server v "$vdev" discardcache no
card_attach "$CW/v.sock" 2
card_verify "$CARD_NBD" "$CW" "$seed" "$ops"
"$DISCARDCTL" -s "$CW/v.ctl" flush --wait > /dev/null || fail "discardctl flush --wait failed"
"$DISCARDCTL" -s "$CW/v.ctl" stats | head -n 3
card_detach || fail "nbd-client -d failed"
card_stop_server
cp "$CW/v.stats.json" "$GUEST_OUT/verify.stats.json"
fwd=$(json_get "$CW/v.stats.json" forwarded)
echo "the engine forwarded $fwd discards to $vdev; $vdev completed $(guest_discards "$vdev" | cut -d' ' -f1)"

card_server v2 "$vdev" discardcache no
card_attach "$CW/v2.sock" 1
card_verify_check "$CARD_NBD" "$CW"
card_detach || fail "nbd-client -d failed"
card_stop_server
echo "verifier: ok through the kernel client, and after a restart"
