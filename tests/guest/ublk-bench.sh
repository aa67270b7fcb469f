#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest, for tests/bench/ublk: four front-ends of the same
# engine on the same backend, a file on the guest's tmpfs (so that the
# front-ends' costs are what differs):
#   ublk   discardublk backend=FILE              -> /dev/ublkb0
#   ublk0  the same with --workers=0 (the queue thread serves alone)
#   nbd    nbdkit discardcache backend=FILE -U S  -> nbd-client -> /dev/nbd0
#   fuse   discardfuse backend=FILE MNT           -> losetup --direct-io=on
# On each, one after the other: fio 4 KiB random reads and writes
# (libaio, O_DIRECT) at queue depths 1 and 16, then the card's churn:
# mkfs.xfs, mount -o discard, churn.py (card-lib.sh's card_workload,
# seeded), fstrim, discardctl flush --wait, and after a remount every
# file checked.  REPS rounds, interleaved so that drift in the guest
# (page cache, tmpfs, the host's other load) spreads over every
# contender: round 1 in the order above, round 2 reversed, and so on.
# Results: $GUEST_OUT/ublk-bench.result, lines
#   fio REP FRONTEND RW QD IOPS
#   churn REP FRONTEND CHURN_MS FSTRIM_MS TRIMS DISCARDS FILES
#   info KEY=VALUE
#
#   ublk-bench.sh [SECONDS [REPS [WORKLOAD]]]
#     SECONDS   each fio run (4)
#     REPS      rounds (3)
#     WORKLOAD  card_workload's churn:ROUNDS:FILES:MAXKIB (empty: the
#               card's, $CARD_WORKLOAD)
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"
source "$abs_top_srcdir/tests/guest/card-lib.sh"

secs=${1:-4} reps=${2:-3} workload=${3:-$CARD_WORKLOAD}
[ -x "$DISCARDUBLK" ] || fail "$DISCARDUBLK is missing"
[ -e "$PLUGIN" ] || fail "$PLUGIN is missing"
requires fio --version
requires nbd-client -V
requires mkfs.xfs -V
modprobe ublk_drv || fail "modprobe ublk_drv failed"
card_modules
modprobe -a fuse loop 2>/dev/null   # built in, or modules
mktempdir
W=$TESTDIR
CW=$W                   # card-lib.sh's working directory
BACK=$W/backend.img
CTL=$W/ctl
RESULT=$GUEST_OUT/ublk-bench.result
: > "$RESULT"

# fio_all REP NAME DEV: the four runs, one result line each.
fio_all ()
{
    local rep=$1 name=$2 dev=$3 rw qd iops
    for rw in randread randwrite; do
        for qd in 1 16; do
            fio --name=b --filename="$dev" --rw="$rw" --bs=4k --iodepth="$qd" \
                --ioengine=libaio --direct=1 --time_based --runtime="$secs" \
                --size=64M --randrepeat=1 --output-format=json \
                > "$W/fio.json" 2> "$W/fio.err" ||
                { cat "$W/fio.err" >&2; fail "fio $rw QD$qd on $dev ($name) failed"; }
            iops=$(/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; print(int(j["read"]["iops"] + j["write"]["iops"]))' "$W/fio.json")
            echo "fio $rep $name $rw $qd $iops" | tee -a "$RESULT"
        done
    done
}

# churn_all REP NAME DEV: the card's churn with XFS -o discard on DEV.
# The TRIMs counted are those of the churn and the fstrim (mkfs's
# whole-device discard is flushed out before), the discards those the
# backend got for them once everything was flushed.
churn_all ()
{
    local rep=$1 name=$2 t ms_churn ms_fstrim trims0 fwd0 trims fwd checked
    # card-lib.sh's mkfs and mount use CARD_NBD: DEV here, and nbd-client's
    # device again after.
    local CARD_NBD=$3
    card_mkfs xfs
    card_mount discard
    "$DISCARDCTL" -s "$CTL" flush --wait > /dev/null || fail "$name: discardctl flush --wait failed"
    trims0=$(ctl_stat "$CTL" trims) fwd0=$(ctl_stat "$CTL" forwarded)
    t=$(_card_now); card_workload "$name" "$workload"; ms_churn=$(( $(_card_now) - t ))
    t=$(_card_now)
    fstrim "$CW/fs" || fail "$name: fstrim failed"
    ms_fstrim=$(( $(_card_now) - t ))
    "$DISCARDCTL" -s "$CTL" flush --wait > /dev/null || fail "$name: discardctl flush --wait failed"
    trims=$(( $(ctl_stat "$CTL" trims) - trims0 )) fwd=$(( $(ctl_stat "$CTL" forwarded) - fwd0 ))
    umount "$CW/fs" || fail "$name: umount failed"
    card_mount ""
    /usr/bin/python3 "$CHURN_PY" verify "$CW/fs" "$CW/$name.manifest" > "$W/verify.log" 2>&1 ||
        { cat "$W/verify.log" >&2; fail "$name: files differ after a remount"; }
    checked=$(awk '/files checked/ { print $2 }' "$W/verify.log")
    umount "$CW/fs" || fail "$name: umount failed"
    echo "churn $rep $name $ms_churn $ms_fstrim $trims $fwd $checked" | tee -a "$RESULT"
}

fresh_backend ()
{
    rm -f "$BACK"
    # XFS wants 300 MiB at least.
    truncate -s 512M "$BACK"
    # Written once, so that reads find data, not holes.
    dd if=/dev/urandom of="$BACK" bs=1M count=64 conv=notrunc status=none
}

# bench_ublk REP NAME OPTIONS...
bench_ublk ()
{
    local rep=$1 name=$2 dev
    shift 2
    "$DISCARDUBLK" --foreground "$@" backend="$BACK" ctl="$CTL" > "$W/ublk.out" 2> "$W/ublk.err" &
    local pid=$!
    cleanup_fn stop_pid "$pid" discardublk
    wait_started "$pid" discardublk 60 test -s "$W/ublk.out"
    dev=$(cat "$W/ublk.out")
    fio_all "$rep" "$name" "$dev"
    churn_all "$rep" "$name" "$dev"
    stop_pid "$pid" discardublk
}

bench_nbd ()
{
    # Left by the last round: start_nbdkit waits for the pid file.
    rm -f "$W/nbd.sock" "$W/nbdkit.pid"
    start_nbdkit -P "$W/nbdkit.pid" -U "$W/nbd.sock" "$PLUGIN" backend="$BACK" ctl="$CTL"
    card_attach "$W/nbd.sock" 1
    fio_all "$1" nbd "$CARD_NBD"
    churn_all "$1" nbd "$CARD_NBD"
    card_detach || fail "nbd-client -d failed"
    stop_pid "$NBDKIT_PID" nbdkit
}

bench_fuse ()
{
    local loop
    mkdir -p "$W/mnt"
    start_discardfuse "$W/mnt" backend="$BACK" ctl="$CTL"
    attach_loop "$W/mnt/disk" || fail "losetup --direct-io=on failed"
    loop=$LOOP_DEV
    fio_all "$1" fuse "$loop"
    churn_all "$1" fuse "$loop"
    detach_loop "$loop"
    stop_discardfuse "$W/mnt" "$DISCARDFUSE_PID"
}

# bench REP NAME: NAME on a fresh backend.
bench ()
{
    fresh_backend
    case $2 in
    ublk) bench_ublk "$1" ublk ;;
    ublk0) bench_ublk "$1" ublk0 --workers=0 ;;
    nbd) bench_nbd "$1" ;;
    fuse) bench_fuse "$1" ;;
    esac
}

order=(ublk ublk0 nbd fuse)
for (( rep = 1; rep <= reps; rep++ )); do
    echo "== round $rep: ${order[*]}"
    for c in "${order[@]}"; do
        bench "$rep" "$c"
    done
    # The next round in the reverse order.
    for (( i = 0; i < ${#order[@]} / 2; i++ )); do
        c=${order[i]} order[i]=${order[-1 - i]} order[-1 - i]=$c
    done
done
{
    echo "info vcpus=$(nproc)"
    echo "info kernel=$GUEST_KERNEL"
    echo "info reps=$reps"
    echo "info seconds=$secs"
    echo "info workload=$workload"
    echo "info card_workload=$CARD_WORKLOAD"
} >> "$RESULT"
