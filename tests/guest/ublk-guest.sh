#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest (tests/guest/run, 6.12): discardublk on the first NVMe
# disk (the verifier on the second, small one).
#
#   ublk-guest.sh [--recoveries N] [--restarts N] [--ops N] [--only PART]
#
#   basics   the queue limits the device got (discard granularity and
#            maximum, write-zeroes, write cache + FUA); O_DIRECT data
#            read back; blkdiscard; blkdiscard -z reads back zeros
#   fs       XFS and ext4: mkfs, mount -o discard, churn, fstrim,
#            discardctl flush --wait and stats; SIGTERM (device deleted,
#            state= saved); a new device, every file intact, fsck clean
#   verify   the project's verifier (tests/verifier/) through the device:
#            verify -> qemu-nbd (--cache=none: O_DIRECT on /dev/ublkbN,
#            its discards BLKDISCARD) -> discardublk (delay=200ms, so
#            that discards are forwarded while it writes) -> the disk;
#            flush, stop, start again, every block checked against the
#            model: no discard landed on data written after it
#   restart  XFS mounted, two writers that fsync; N times kill -9 and
#            --recover, N times a restart (SIGTERM with --keep then
#            --recover, and every other time SIGUSR1, exit 75, then the
#            systemd unit's start: the helper's ublk-start, which must
#            choose --recover): 0 errors, every file intact, fsck clean
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"
source "$abs_top_srcdir/tests/guest/card-lib.sh"

recoveries=10 restarts=10 only= verify_ops=2000
while [ $# -gt 0 ]; do
    case $1 in
    --only) only=$2; shift ;;
    --ops) verify_ops=$2; shift ;;
    --recoveries) recoveries=$2; shift ;;
    --restarts) restarts=$2; shift ;;
    *) fail "unknown option $1" ;;
    esac
    shift
done
DISCARDUBLK=$abs_top_builddir/ublk/discardublk
WRITER=$abs_top_srcdir/tests/guest/ublk-writer.py
VERIFY=$abs_top_builddir/tests/verifier/verify
[ -x "$DISCARDUBLK" ] || fail "$DISCARDUBLK is missing: build with liburing-dev"
requires mkfs.xfs -V
requires mkfs.ext4 -V
modprobe ublk_drv || fail "modprobe ublk_drv failed on $GUEST_KERNEL"
[ -c /dev/ublk-control ] || fail "no /dev/ublk-control after modprobe ublk_drv"
guest_disks_load || fail "the disks did not appear"
DISK=$(guest_disk_of nvme) || fail "no NVMe disk"
VDISK=$(guest_disk_of nvme 1) || fail "no second NVMe disk (the verifier's)"
mktempdir
W=$TESTDIR
CW=$W                   # card-lib.sh's working directory
UBLK_PID= UBLK_DEV=
# How discardublk starts: itself, or as discardublk@.service starts it.
UBLK_LAUNCH=("$DISCARDUBLK" --foreground)
HELPER=$abs_top_builddir/systemd/discardcache-helper

# ublk_start ARGS...: discardublk --foreground on $DISK; sets UBLK_PID and
# UBLK_DEV (what it printed).  Stopped by pid at exit.
ublk_start ()
{
    : > "$W/ublk.out"
    "${UBLK_LAUNCH[@]}" "$@" backend="$DISK" ctl="$W/ctl" \
        statsfile="$W/stats.json" state="$W/$(basename "$DISK").state" \
        > "$W/ublk.out" 2>> "$W/ublk.err" &
    UBLK_PID=$!
    cleanup_fn ublk_stop_pid "$UBLK_PID"
    local i
    for (( i = 0; i < 600; i++ )); do
        [ -s "$W/ublk.out" ] && break
        kill -0 "$UBLK_PID" 2>/dev/null ||
            fail "discardublk $* exited at start: $(cat "$W/ublk.err")"
        sleep 0.1
    done
    [ -s "$W/ublk.out" ] || fail "discardublk $* did not start within 60 s"
    UBLK_DEV=$(cat "$W/ublk.out")
    CARD_NBD=$UBLK_DEV      # card-lib.sh's mkfs, mount and fsck use it
    [ -b "$UBLK_DEV" ] || fail "discardublk printed '$UBLK_DEV', not a block device"
}

ublk_stop_pid ()
{
    stop_pid "$1" discardublk
}

# ublk_stop [SIGNAL [STATUS]]: TERM (or SIGNAL); it must exit 0 (or STATUS).
ublk_stop ()
{
    local sig=${1:-TERM} want=${2:-0} status
    _stopped_pids[$UBLK_PID]=1
    kill -"$sig" "$UBLK_PID"
    await_exit "$UBLK_PID" discardublk "SIG$sig"
    wait "$UBLK_PID"; status=$?
    [ "$status" -eq "$want" ] ||
        fail "discardublk exited $status at SIG$sig, not $want: $(cat "$W/ublk.err")"
}

queue () { cat "/sys/block/${UBLK_DEV#/dev/}/queue/$1"; }

basics ()
{
    ublk_start
    echo "basics: $UBLK_DEV: discard_granularity $(queue discard_granularity)," \
         "discard_max_bytes $(queue discard_max_bytes), write_zeroes_max_bytes" \
         "$(queue write_zeroes_max_bytes), write_cache '$(queue write_cache)', fua $(queue fua)"
    [ "$(queue discard_granularity)" -eq "$(guest_queue "$DISK" discard_granularity)" ] ||
        [ "$(queue discard_granularity)" -ge 4096 ] || fail "discard granularity $(queue discard_granularity)"
    [ "$(queue discard_max_bytes)" -gt 0 ] || fail "no discard"
    [ "$(queue write_zeroes_max_bytes)" -gt 0 ] || fail "no write-zeroes"
    [ "$(queue write_cache)" = "write back" ] || fail "no volatile cache: the kernel would send no FLUSH"
    [ "$(queue fua)" = 1 ] || fail "no FUA"
    head -c 4194304 /dev/urandom > "$W/data"
    dd if="$W/data" of="$UBLK_DEV" bs=1M oflag=direct status=none || fail "O_DIRECT write failed"
    dd if="$UBLK_DEV" of="$W/back" bs=1M count=4 iflag=direct status=none || fail "O_DIRECT read failed"
    cmp "$W/data" "$W/back" || fail "the data read back differs"
    blkdiscard -o 0 -l 1M "$UBLK_DEV" || fail "blkdiscard failed"
    blkdiscard -z -o 1M -l 1M "$UBLK_DEV" || fail "blkdiscard -z failed"
    cmp -n 1048576 <(dd if="$UBLK_DEV" bs=1M skip=1 count=1 iflag=direct status=none) \
        /dev/zero || fail "the zeroed range does not read back as zeros"
    dd if="$UBLK_DEV" of="$W/back" bs=1M skip=2 count=2 iflag=direct status=none
    cmp "$W/back" <(tail -c 2097152 "$W/data") || fail "data beside the zeroed range changed"
    daemon_mode
    ublk_stop
    [ ! -e "$UBLK_DEV" ] || fail "$UBLK_DEV still there after SIGTERM"
}

# daemon_mode: with device 0 up, discardublk in the background: --id=0
# again fails in the child after the fork, and the parent says so (exit
# 1, the kernel's error on stderr); another device is printed once it
# serves, then stopped by SIGTERM to the daemon (found by its control
# socket in its command line) and deleted.
daemon_mode ()
{
    local out status=0 p pid=
    truncate -s 64M "$W/small.img"
    out=$("$DISCARDUBLK" --id=0 backend="$W/small.img" ctl="$W/dctl" 2> "$W/d.err") || status=$?
    [ "$status" -eq 1 ] || fail "a second --id=0 exited $status: $out $(cat "$W/d.err")"
    grep -q "device 0 exists already" "$W/d.err" || fail "no word of the taken --id: $(cat "$W/d.err")"
    out=$("$DISCARDUBLK" backend="$W/small.img" ctl="$W/dctl" 2> "$W/d.err") ||
        fail "discardublk in the background failed: $(cat "$W/d.err")"
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/exe" 2>/dev/null)" = "$DISCARDUBLK" ] &&
            tr '\0' ' ' < "$p/cmdline" | grep -qF "ctl=$W/dctl" && pid=${p#/proc/}
    done
    [ -n "$pid" ] || fail "no daemon running after it printed $out"
    cleanup_fn stop_pid "$pid" "discardublk daemon"
    [ -b "$out" ] || fail "the daemon printed '$out', not a block device"
    dd if="$out" of=/dev/null bs=1M count=1 iflag=direct status=none || fail "reading $out failed"
    stop_pid "$pid" "discardublk daemon"
    [ ! -e "$out" ] || fail "$out still there after the daemon's SIGTERM"
    echo "basics: in the background: $out served, stopped and deleted; a taken --id refused"
}

verify_line ()
{
    local seed=${VERIFY_SEED:-$(( $(date +%s) % 100000 ))}
    requires qemu-nbd --version
    [ -x "$VERIFY" ] || fail "$VERIFY is missing: build it (make check)"
    local disk=$DISK
    DISK=$VDISK             # a small disk: the check reads every block
    blkdiscard -f "$DISK" > /dev/null 2>&1
    ublk_start delay=200ms idle=10ms
    card_verify "$UBLK_DEV" "$W" "$seed" "$verify_ops"
    "$DISCARDCTL" -s "$W/ctl" flush --wait > /dev/null || fail "discardctl flush --wait failed"
    echo "verify: $(ctl_stat "$W/ctl" trims) trims in, $(ctl_stat "$W/ctl" forwarded) forwarded (seed $seed)"
    ublk_stop
    ublk_start
    card_verify_check "$UBLK_DEV" "$W"
    ublk_stop
    DISK=$disk
}

fs_line ()
{
    local fs=$1 trims
    ublk_start
    card_mkfs "$fs"
    card_mount discard
    mkdir -p "$W/fs/churn"
    /usr/bin/python3 "$CHURN_PY" run "$W/fs/churn" "$W/manifest" --seed 38 \
        --rounds 4 --files 40 --max-kib 512 > "$W/churn.log" ||
        { cat "$W/churn.log" >&2; fail "$fs: churn failed"; }
    fstrim "$W/fs" || fail "$fs: fstrim failed"
    "$DISCARDCTL" -s "$W/ctl" flush --wait > /dev/null || fail "$fs: discardctl flush failed"
    trims=$(ctl_stat "$W/ctl" trims)
    echo "$fs: $trims trims in, $(ctl_stat "$W/ctl" forwarded) discards forwarded," \
         "$(ctl_stat "$W/ctl" pending_bytes) bytes pending after flush"
    [ "$trims" -gt 0 ] || fail "$fs: no trim reached discardublk"
    umount "$W/fs" || fail "$fs: umount failed"
    ublk_stop
    [ -s "$W/stats.json" ] || fail "$fs: no statsfile after SIGTERM"
    ublk_start
    card_fsck "$fs"
    card_mount discard
    /usr/bin/python3 "$CHURN_PY" verify "$W/fs/churn" "$W/manifest" ||
        fail "$fs: files differ after a restart"
    umount "$W/fs" || fail "$fs: umount failed"
    ublk_stop
}

# take_over HOW: the server goes under the writer (kill: kill -9; term:
# SIGTERM with --keep; usr1: SIGUSR1, exit 75) and --recover takes the
# device over (usr1: started as discardublk@.service starts it, by the
# helper, which must see the device and recover it).
take_over ()
{
    local id=${UBLK_DEV#/dev/ublkb} dev=$UBLK_DEV
    case $1 in
    kill)
        kill -KILL "$UBLK_PID"
        wait "$UBLK_PID" 2>/dev/null
        _stopped_pids[$UBLK_PID]=1 ;;
    term) ublk_stop ;;
    usr1) ublk_stop USR1 75 ;;
    esac
    sleep 0.3      # the writer now waits on the kernel
    echo "take_over $1: $(cut -d' ' -f1 /proc/uptime) s" >> "$W/steps"
    if [ "$1" = usr1 ]; then
        local said
        said=$(grep -c "device $id is there: recovering" "$W/ublk.err")
        UBLK_LAUNCH=(env DISCARDUBLK="$DISCARDUBLK" "$HELPER" ublk-start "$id")
        ublk_start --keep
        UBLK_LAUNCH=("$DISCARDUBLK" --foreground)
        [ "$(grep -c "device $id is there: recovering" "$W/ublk.err")" -gt "$said" ] ||
            fail "the unit's helper did not choose --recover"
    else
        ublk_start --keep --recover --id="$id"
    fi
    [ "$UBLK_DEV" = "$dev" ] || fail "--recover printed $UBLK_DEV, not $dev"
    sleep 0.7
}

restarts ()
{
    local i t0
    ublk_start --keep
    card_mkfs xfs
    card_mount discard
    rm -f "$W/stop"
    # Two writers, so that requests overlap and the workers serve some
    # when the server dies.
    local writers=() w
    for w in 1 2; do
        /usr/bin/python3 "$WRITER" "$W/fs/w$w" "$W/wmanifest$w" "$W/stop" > "$W/writer$w.log" 2>&1 &
        writers+=($!)
        cleanup_fn stop_pid "$!" writer
    done
    sleep 1
    t0=$SECONDS
    for (( i = 0; i < recoveries; i++ )); do
        take_over kill
        kill -0 "${writers[0]}" 2>/dev/null && kill -0 "${writers[1]}" 2>/dev/null || break
    done
    for (( i = 0; i < restarts; i++ )); do
        if (( i % 2 )); then take_over usr1; else take_over term; fi
        kill -0 "${writers[0]}" 2>/dev/null && kill -0 "${writers[1]}" 2>/dev/null || break
    done
    touch "$W/stop"
    local status=0 pid
    for pid in "${writers[@]}"; do
        wait "$pid" || status=$?
        _stopped_pids[$pid]=1
    done
    cat "$W/writer1.log" "$W/writer2.log"
    [ "$status" -eq 0 ] || fail "a writer failed across the restarts (status $status)"
    echo "restart: $recoveries kill -9 + --recover, $restarts restarts (SIGTERM --keep or SIGUSR1, then --recover)" \
         "in $(( SECONDS - t0 )) s, the writers saw no error"
    dmesg | grep -i "ublkb.*error\|I/O error\|xfs.*shutdown" && fail "the kernel logged I/O errors"
    umount "$W/fs" || fail "umount failed"
    card_fsck xfs
    card_mount discard
    for w in 1 2; do
        /usr/bin/python3 "$CHURN_PY" verify "$W/fs/w$w" "$W/wmanifest$w" ||
            fail "files differ after the restarts (writer $w)"
    done
    umount "$W/fs"
    ublk_stop
}

cleanup_fn show_steps
show_steps ()
{
    [ -s "$W/steps" ] && cat "$W/steps"
    [ -s "$W/ublk.err" ] && { echo "== discardublk's stderr"; cat "$W/ublk.err"; }
    return 0
}
case ${only:-all} in
all) basics; verify_line; fs_line xfs; fs_line ext4; restarts ;;
basics) basics ;;
verify) verify_line ;;
fs) fs_line xfs; fs_line ext4 ;;
restarts) restarts ;;
*) fail "--only $only: basics, verify, fs or restarts" ;;
esac
echo "ublk-guest: all passed"
