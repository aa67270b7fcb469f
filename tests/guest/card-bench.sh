#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest, for tests/bench/guest: the card's line with XFS on
# the first disk of each KIND, once per contender: discardcache with
# passthrough=true, nbdkit's own file plugin, and discardcache's
# defaults.  Results: $GUEST_OUT/KIND-MODE.result (card_line's).
#
#   card-bench.sh WORKLOAD KIND...      (WORKLOAD: card_line's --workload)
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"
source "$abs_top_srcdir/tests/guest/card-lib.sh"

workload=$1
shift
[ -e "$PLUGIN" ] || fail "$PLUGIN is missing: build first"
guest_disks_load || fail "the disks did not appear"
for kind in "$@"; do
    dev=$(guest_disk_of "$kind") || fail "no $kind disk"
    {
        echo "granularity=$(guest_queue "$dev" discard_granularity)"
        echo "max_discard=$(guest_queue "$dev" discard_max_bytes)"
        echo "write_zeroes=$(guest_queue "$dev" write_zeroes_max_bytes)"
    } > "$GUEST_OUT/$kind.queue"
    for mode in passthrough file discardcache; do
        card_line "$kind-$mode" "$dev" xfs "$mode" --workload "$workload"
    done
done
{
    echo "kernel=$GUEST_KERNEL"
    echo "nbdkit=$(nbdkit --version)"
    echo "vcpus=$(nproc)"
    echo "nbdclient=nbd-client $(nbd-client -V 2>&1 | awk '{ print $NF; exit }')"
} > "$GUEST_OUT/guest.info"
