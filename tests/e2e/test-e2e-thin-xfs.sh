#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache thin mode end to end: the same XFS file churn as
# test-e2e-xfs.sh, first in identity mode, then in thin mode (slot=auto,
# 4 KiB here; exported size twice the backing file's), and the discards
# each sends to the backing file side by side, with passthrough=true
# (every TRIM sent at once) as the baseline (mkfs -K: its whole-device
# trim would dwarf the churn's).  In thin mode freed slots are reused by
# later writes, so their discards are never sent: far fewer bytes are
# discarded; with the default reuse reserve (64 MiB) the freed slots
# stay undiscarded for reuse (see docs/benchmarks.md, section 6).  Then: every file intact, a restart of the server from
# meta=, the filesystem mounts, xfs_repair -n is clean, and the files
# are still intact.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/e2e-lib.sh"
e2e_requires
requires xfs_repair -V

mktempdir
E2E_MKFS_OPTS=-K
churn ()
{
    /usr/bin/python3 "$abs_top_srcdir/tests/e2e/churn.py" "$@"
}

# run NAME KEYS...: mkfs, churn, fstrim, verify, stop; the statistics in
# $TESTDIR/NAME/stats.json.
run ()
{
    local name=$1 d=$TESTDIR/$1
    shift
    mkdir -p "$d"
    e2e_start "$d" 1G delay=5s idle=100ms ctl=none "$@"
    churn run "$E2E_FS" "$d/manifest" --seed 42 --rounds 8 --files 60 \
        --max-kib 2048 || fail "$name: churn failed"
    fstrim "$E2E_FS" || fail "$name: fstrim failed"
    churn verify "$E2E_FS" "$d/manifest" || fail "$name: checksums differ"
    e2e_teardown
    wait_for_file "$d/stats.json" || fail "$name: no statistics"
}

run identity
run passthrough passthrough=true
: "${THIN_SLOT:=auto}"
run thin thin=on slot="$THIN_SLOT" size=2G meta="$TESTDIR/thin/meta"

d=$TESTDIR/thin
stat_of () { json_get "$TESTDIR/$1/stats.json" "$2"; }
printf '%-12s %10s %12s %14s %12s\n' mode trims forwarded "forwarded MiB" "reuses"
for m in identity passthrough thin; do
    trims=trims
    [ "$m" = thin ] && trims=thin_trims
    printf '%-12s %10d %12d %14d %12s\n' "$m" "$(stat_of "$m" "$trims")" \
        "$(stat_of "$m" forwarded)" \
        $(( $(stat_of "$m" forwarded_bytes) / 1048576 )) \
        "$( [ "$m" = thin ] && echo $(( $(stat_of thin thin_reused) +
                                         $(stat_of thin thin_reserve_writes) )) ||
            echo -)"
done
echo "thin: $(stat_of thin trims) trims at backend addresses (one per physical run)"
echo "thin: $(stat_of thin thin_reserve_writes) writes from the reserve," \
     "$(stat_of thin thin_reused) slots reused while their discard was pending," \
     "$(( $(stat_of thin thin_reserve_bytes) / 1048576 )) MiB in the reserve at the stop"
echo "thin: $(stat_of thin thin_free_pending_runs) runs of freed slots left pending" \
     "(largest $(stat_of thin thin_free_pending_largest) slots)," \
     "$(stat_of thin thin_zero_fills) zero-fills"
echo "thin: $(stat_of thin thin_allocated) slots allocated," \
     "$(stat_of thin thin_mapped) mapped at the stop of $(stat_of thin thin_slots)"
[ $(( $(stat_of thin thin_reused) + $(stat_of thin thin_reserve_writes) )) -gt 0 ] ||
    fail "thin: no slot was reused"
[ $(( $(stat_of thin forwarded_bytes) * 4 )) -lt "$(stat_of identity forwarded_bytes)" ] ||
    fail "thin mode discarded more than a quarter of identity mode's bytes"

# Restart from meta=: no mkfs this time.
start_nbdkit -P "$d/again.pid" -U "$d/again.sock" "$PLUGIN" \
    backend="$d/backing" ctl=none thin=on slot="$THIN_SLOT" size=2G meta="$d/meta"
e2e_nbdfuse "$d" "$d/again.sock"
attach_loop "$d/fuse/disk" || fail "losetup after the restart failed"
xfs_repair -n "$LOOP_DEV" > "$d/repair.log" 2>&1 ||
    { cat "$d/repair.log"; fail "xfs_repair -n found problems after the restart"; }
mount "$LOOP_DEV" "$d/fs" || fail "mount after the restart failed"
cleanup_fn umount_if_mounted "$d/fs"
churn verify "$d/fs" "$d/manifest" || fail "checksums differ after the restart"
umount "$d/fs"
detach_loop "$LOOP_DEV"
e2e_stop_nbdfuse
stop_pidfile "$d/again.pid" nbdkit
echo "e2e xfs thin: ok"
