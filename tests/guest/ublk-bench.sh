#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest, for tests/bench/ublk: 4 KiB random reads and writes
# (fio, libaio, O_DIRECT) at queue depths 1 and 16 through three
# front-ends of the same engine on the same backend, a file on the
# guest's tmpfs (so that the front-ends' costs are what differs):
#   ublk   discardublk backend=FILE              -> /dev/ublkb0
#   ublk0  the same with --workers=0 (the queue thread serves alone)
#   nbd    nbdkit discardcache backend=FILE -U S  -> nbd-client -> /dev/nbd0
#   fuse   discardfuse backend=FILE MNT           -> losetup --direct-io=on
# Results: $GUEST_OUT/ublk-bench.result, "FRONTEND RW QD IOPS" lines.
#
#   ublk-bench.sh [SECONDS]       (each fio run; default 5)
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"

secs=${1:-5}
DISCARDUBLK=$abs_top_builddir/ublk/discardublk
[ -x "$DISCARDUBLK" ] || fail "$DISCARDUBLK is missing"
[ -e "$PLUGIN" ] || fail "$PLUGIN is missing"
requires fio --version
requires nbd-client -V
modprobe ublk_drv || fail "modprobe ublk_drv failed"
modprobe nbd || fail "modprobe nbd failed"
modprobe -a fuse loop 2>/dev/null   # built in, or modules
mktempdir
W=$TESTDIR
BACK=$W/backend.img
RESULT=$GUEST_OUT/ublk-bench.result
: > "$RESULT"

# fio_all NAME DEV: the four runs, one result line each.
fio_all ()
{
    local name=$1 dev=$2 rw qd iops
    for rw in randread randwrite; do
        for qd in 1 16; do
            fio --name=b --filename="$dev" --rw="$rw" --bs=4k --iodepth="$qd" \
                --ioengine=libaio --direct=1 --time_based --runtime="$secs" \
                --size=64M --randrepeat=1 --output-format=json \
                > "$W/fio.json" 2> "$W/fio.err" ||
                { cat "$W/fio.err" >&2; fail "fio $rw QD$qd on $dev ($name) failed"; }
            iops=$(/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; print(int(j["read"]["iops"] + j["write"]["iops"]))' "$W/fio.json")
            echo "$name $rw $qd $iops" | tee -a "$RESULT"
        done
    done
}

fresh_backend ()
{
    rm -f "$BACK"
    truncate -s 128M "$BACK"
    # Written once, so that reads find data, not holes.
    dd if=/dev/urandom of="$BACK" bs=1M count=64 conv=notrunc status=none
}

# bench_ublk NAME OPTIONS...
bench_ublk ()
{
    local name=$1
    shift
    fresh_backend
    "$DISCARDUBLK" --foreground "$@" backend="$BACK" ctl=none > "$W/ublk.out" 2> "$W/ublk.err" &
    local pid=$!
    cleanup_fn stop_pid "$pid" discardublk
    wait_started "$pid" discardublk 60 test -s "$W/ublk.out"
    fio_all "$name" "$(cat "$W/ublk.out")"
    stop_pid "$pid" discardublk
}

bench_nbd ()
{
    fresh_backend
    start_nbdkit -P "$W/nbdkit.pid" -U "$W/nbd.sock" "$PLUGIN" backend="$BACK" ctl=none
    nbd-client -u "$W/nbd.sock" /dev/nbd0 > "$W/nbd-client.log" 2>&1 ||
        { cat "$W/nbd-client.log" >&2; fail "nbd-client failed"; }
    cleanup_fn nbd-client -d /dev/nbd0
    wait_started "$NBDKIT_PID" nbdkit 10 test "$(cat /sys/block/nbd0/size)" -gt 0
    fio_all nbd /dev/nbd0
    nbd-client -d /dev/nbd0 > /dev/null 2>&1
    stop_pid "$NBDKIT_PID" nbdkit
}

bench_fuse ()
{
    local loop
    fresh_backend
    mkdir -p "$W/mnt"
    start_discardfuse "$W/mnt" backend="$BACK" ctl=none
    attach_loop "$W/mnt/disk" || fail "losetup --direct-io=on failed"
    loop=$LOOP_DEV
    fio_all fuse "$loop"
    detach_loop "$loop"
    stop_discardfuse "$W/mnt" "$DISCARDFUSE_PID"
}

bench_ublk ublk
bench_ublk ublk0 --workers=0
bench_nbd
bench_fuse
echo "vcpus=$(nproc) kernel=$GUEST_KERNEL" >> "$RESULT"
