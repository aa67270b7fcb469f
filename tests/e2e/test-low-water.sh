#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: low-water= (issue 24, invariant 11) on a real small
# file system.  A 96 MiB ext4, loop-mounted, holds the backing file (48
# MiB written); the front-end serves it with delay=1h, a client trims 40
# MiB (pending: the store still holds it), and a filler file takes the
# store's free space below the mark.  With low-water=24M the pending
# bytes reach the backend within a flusher cycle (pending_bytes 0,
# pressure_forwarded_bytes, the store's free space back above the mark,
# pressure entered and left); without the key nothing moves.  Through
# nbdkit (the trim sent through libnbd) and discardfuse (fallocate
# --punch-hole on its disk).  Then thin mode's reuse reserve, which
# pressure discards too.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires_loop
requires_fuse
requires mkfs.ext4 -V
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --version
[ -x "$DISCARDFUSE" ] || fail "$DISCARDFUSE is missing: build first (make)"

mktempdir
MiB=$(( 1024 * 1024 ))

store_free ()
{
    df -B1 --output=avail "$store" | tail -n 1 | tr -d ' '
}

# make_store DIR: a 96 MiB ext4, loop-mounted at DIR/store (sets store).
make_store ()
{
    store=$1/store
    truncate -s 96M "$1/store.img"
    mkfs.ext4 -q -F -m 0 "$1/store.img" || fail "mkfs.ext4 failed"
    mkdir -p "$store"
    mount -o loop "$1/store.img" "$store" || fail "mount of the store failed"
    cleanup_fn umount_if_mounted "$store"
}

# scenario FRONTEND KEYS...: prints what happened; sets PENDING, SENT,
# FREE_BEFORE, FREE_AFTER, ENTERED.
scenario ()
{
    local frontend=$1 dir i
    shift
    dir=$(mktemp -d "$TESTDIR/$frontend.XXXX")
    ctl=$dir/ctl
    make_store "$dir"
    mkdir -p "$dir/mnt"
    dd if=/dev/urandom of="$store/disk.img" bs=1M count=48 conv=fsync status=none
    case $frontend in
    nbdkit)
        start_nbdkit -P "$dir/pid" -U "$dir/sock" "$PLUGIN" \
            backend="$store/disk.img" ctl="$ctl" delay=1h "$@"
        wait_for_ctl "$ctl"
        /usr/bin/python3 -c 'import nbd, sys
h = nbd.NBD(); h.connect_unix(sys.argv[1]); h.trim(int(sys.argv[2]), 0)' \
            "$dir/sock" $(( 40 * MiB )) || fail "the trim through nbdkit failed" ;;
    fuse)
        start_discardfuse "$dir/mnt" backend="$store/disk.img" ctl="$ctl" \
            delay=1h "$@"
        fallocate --punch-hole --keep-size -o 0 -l 40M "$dir/mnt/disk" ||
            fail "fallocate --punch-hole on discardfuse failed" ;;
    esac
    PENDING=$(ctl_stat "$ctl" pending_bytes)
    [ "$PENDING" -eq $(( 40 * MiB )) ] || fail "$frontend: $PENDING bytes pending after the trim, expected 40 MiB"
    FREE_BEFORE=$(store_free)
    # Below the mark: the store's free space minus 30 MiB.
    dd if=/dev/urandom of="$store/filler" bs=1M count=30 conv=fsync status=none
    FREE_LOW=$(( FREE_BEFORE - 30 * MiB ))  # (the flusher may act during dd)
    for (( i = 0; i < 30; i++ )); do
        sleep 0.1
        [ "$(ctl_stat "$ctl" pending_bytes)" -eq 0 ] && break
    done
    sleep 2                             # and nothing more moves
    sync -f "$store"
    FREE_AFTER=$(store_free) PENDING=$(ctl_stat "$ctl" pending_bytes)
    SENT=$(ctl_stat "$ctl" pressure_forwarded_bytes) ENTERED=$(ctl_stat "$ctl" pressure_entered)
    FORWARDED=$(ctl_stat "$ctl" forwarded_bytes) LEFT=$(ctl_stat "$ctl" pressure)
    echo "$frontend $*: store free $FREE_BEFORE, the filler takes it to $FREE_LOW;" \
         "$(( i * 100 )) ms after the filler, pending $PENDING, forwarded $FORWARDED" \
         "(under pressure $SENT), store free $FREE_AFTER, pressure entered $ENTERED, now $LEFT"
    case $frontend in
    nbdkit) stop_pidfile "$dir/pid" nbdkit ;;
    fuse) stop_discardfuse "$dir/mnt" "$DISCARDFUSE_PID" ;;
    esac
    umount "$store"
}

for frontend in nbdkit fuse; do
    scenario $frontend low-water=24M
    [ "$PENDING" -eq 0 ] || fail "$frontend: $PENDING bytes still pending under pressure"
    [ "$SENT" -ge $(( 40 * MiB )) ] || fail "$frontend: only $SENT bytes forwarded under pressure"
    [ "$ENTERED" -eq 1 ] && [ "$LEFT" -eq 0 ] || fail "$frontend: pressure entered $ENTERED times, now $LEFT (expected once, and left)"
    [ "$FREE_AFTER" -ge $(( FREE_LOW + 32 * MiB )) ] || fail "$frontend: the store's free space did not come back ($FREE_LOW -> $FREE_AFTER)"

    scenario $frontend
    [ "$PENDING" -eq $(( 40 * MiB )) ] && [ "$FORWARDED" -eq 0 ] ||
        fail "$frontend: without low-water= something moved ($PENDING pending, $FORWARDED forwarded)"
done

# Thin mode's reuse reserve gives its space back under pressure (invariant
# 12).  48 MiB written through thin mode (slot=64k, reserve=32M), every
# other MiB trimmed: 24 runs, all kept in the reserve, nothing pending.
# The filler takes the store below the mark; with no client input at all
# (no FLUSH, no request) the service's tick releases the whole reserve
# within a second of the pressure (issue 36, item 3; invariant 8) and the
# flusher forwards it under pressure until the store is back above the
# mark: the backing file holds no more than the live 24 MiB and what is
# still pending.
thin_scenario ()
{
    local dir i alloc kept pending key
    local -A st=()
    dir=$(mktemp -d "$TESTDIR/thin.XXXX")
    ctl=$dir/ctl
    make_store "$dir"
    truncate -s 64M "$store/disk.img"
    start_nbdkit -P "$dir/pid" -U "$dir/sock" "$PLUGIN" backend="$store/disk.img" \
        thin=on slot=64k size=64M reserve=32M meta="$dir/meta" ctl="$ctl" \
        delay=1h idle=0 low-water=24M
    wait_for_ctl "$ctl"
    /usr/bin/python3 - "$dir/sock" write trim-odd <<'PY' || fail "thin: the client failed"
import os, sys
import nbd
h = nbd.NBD()
h.connect_unix(sys.argv[1])
M = 1024 * 1024
for i in range(48):
    h.pwrite(os.urandom(M), i * M)
h.flush()
for i in range(1, 48, 2):
    h.trim(M, i * M)
h.flush()
h.shutdown()
PY
    kept=$(ctl_stat "$ctl" thin_reserve_bytes)
    [ "$kept" -eq $(( 24 * MiB )) ] && [ "$(ctl_stat "$ctl" pending_bytes)" -eq 0 ] ||
        fail "thin: the reserve holds $kept bytes (expected 24 MiB, nothing pending)"
    dd if=/dev/urandom of="$store/filler" bs=1M count=30 conv=fsync status=none
    for (( i = 0; i < 30; i++ )); do
        sleep 0.1
        [ "$(ctl_stat "$ctl" pressure_entered)" -ge 1 ] && break
    done
    local entered=$EPOCHREALTIME released
    while [ "$(ctl_stat "$ctl" thin_reserve_bytes)" -ne 0 ]; do
        (( $(date +%s%N) / 1000000 - ${entered/./} / 1000 < 3000 )) ||
            fail "thin: no client input, and the reserve was not released in 3 s of pressure"
        sleep 0.05
    done
    released=$(( $(date +%s%N) / 1000000 - ${entered/./} / 1000 ))
    echo "thin: the reserve was released ${released} ms after pressure was seen, no client input"
    [ "$released" -le 1000 ] ||
        fail "thin: the reserve was released ${released} ms after pressure, more than a second"
    for (( i = 0; i < 30; i++ )); do
        sleep 0.1
        [ "$(ctl_stat "$ctl" pending_bytes)" -eq 0 ] && break
    done
    sync -f "$store"
    alloc=$(( $(stat -c '%b * %B' "$store/disk.img") ))
    # One reading of the statistics for every check below.
    "$DISCARDCTL" -s "$ctl" stats --json >"$dir/stats.json" || fail "thin: discardctl stats"
    for key in thin_reserve_bytes thin_reserve_released_bytes pressure_forwarded_bytes \
               pressure_entered pending_bytes; do
        st[$key]=$(json_get "$dir/stats.json" "$key")
    done
    pending=${st[pending_bytes]}
    echo "thin: reserve $kept -> ${st[thin_reserve_bytes]} bytes," \
         "released ${st[thin_reserve_released_bytes]}," \
         "under pressure ${st[pressure_forwarded_bytes]}, pressure entered" \
         "${st[pressure_entered]}, pending $pending; the backing file holds $alloc bytes"
    [ "${st[pressure_entered]}" -ge 1 ] || fail "thin: pressure never entered"
    [ "${st[thin_reserve_bytes]}" -eq 0 ] ||
        fail "thin: under pressure the reserve still holds ${st[thin_reserve_bytes]} bytes"
    [ "${st[thin_reserve_released_bytes]}" -eq "$kept" ] ||
        fail "thin: ${st[thin_reserve_released_bytes]} bytes released, not the reserve's $kept"
    [ "${st[pressure_forwarded_bytes]}" -gt 0 ] ||
        fail "thin: nothing forwarded under pressure"
    # The bound: the live 24 MiB + the reserve (none now) + what is still
    # pending (once the store is back above the mark, the rest waits for
    # delay=), and a block or two at the punched runs' edges.
    [ "$alloc" -le $(( 24 * MiB + pending + 256 * 1024 )) ] ||
        fail "thin: the backing file holds $alloc bytes, more than the live 24 MiB + $pending pending"
    stop_pidfile "$dir/pid" nbdkit
    umount "$store"
}
thin_scenario

# The key is refused where free space is unknown.
start_nbdkit -P "$TESTDIR/mem.pid" -U "$TESTDIR/mem.sock" memory 16M
if "$NBDKIT" -f -U "$TESTDIR/x.sock" "$PLUGIN" backend="nbd+unix:///?socket=$TESTDIR/mem.sock" \
       low-water=10% 2>"$TESTDIR/refused.log"; then
    fail "low-water= was accepted on an NBD backend"
fi
grep -q "low-water: the free space of backend" "$TESTDIR/refused.log" ||
    { cat "$TESTDIR/refused.log"; fail "no clear message refusing low-water= on NBD"; }
echo "low-water: ok"
