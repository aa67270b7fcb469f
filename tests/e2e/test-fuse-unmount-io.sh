#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardfuse: stopping while I/O runs.  Before each stop, known blocks
# are written with O_DIRECT and fsync through the loop device, and a
# trimmed range is partly rewritten (fsync) so the stop has discards to
# forward next to acknowledged data.  Then fio writes and trims in the
# background and:
#
#   A. SIGTERM to discardfuse: it unmounts, finishes the requests in
#      progress, forwards what is pending and exits 0 within 60 s (no
#      crash); loop's later I/O fails, as it must.
#   B. fusermount3 -u -z: the mount leaves the namespace at once, the
#      daemon goes on serving loop (fio sees no error), and exits 0 once
#      losetup -d lets go of the image.
#
# Each time the backing file must hold every fsynced block, and the part
# of the trimmed range that was not rewritten must have been forwarded.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires_fuse
requires_loop
requires fio --version

mktempdir
dir=$TESTDIR
mnt=$dir/mnt
mkdir "$mnt"
head -c 4M /dev/urandom > "$dir/known"
head -c 4M /dev/urandom > "$dir/rewritten"
MiB=$((1024 * 1024))

# region FILE OFFSET_MIB LENGTH_MIB: a range of a file, on stdout.
region ()
{
    dd if="$1" bs=1M skip="$2" count="$3" status=none
}

# prepare: mount, attach, write the known data; sets dev.
prepare ()
{
    rm -f "$dir/backing" "$dir/stats.json"
    truncate -s 512M "$dir/backing"
    start_discardfuse "$mnt" backend="$dir/backing" delay=60s \
        statsfile="$dir/stats.json"
    attach_loop "$mnt/disk" || fail "losetup failed"
    dev=$LOOP_DEV
    dd if="$dir/known" of="$dev" bs=64k oflag=direct conv=fsync,notrunc status=none ||
        fail "writing the known blocks failed"
    blkdiscard -o $((8 * MiB)) -l $((8 * MiB)) "$dev" || fail "blkdiscard failed"
    dd if="$dir/rewritten" of="$dev" bs=64k seek=128 oflag=direct conv=fsync,notrunc \
        status=none || fail "rewriting part of the trimmed range failed"
}

# background_io: fio writes and trims past 32M until stopped or 60 s.
background_io ()
{
    timeout 120 fio --output="$dir/fio.out" --filename="$dev" --direct=1 \
        --offset=32M --size=256M --time_based --runtime="$1" \
        --name=writes --ioengine=libaio --iodepth=8 --rw=randwrite --bs=4k-64k \
        --name=trims --ioengine=psync --rw=randtrim --bs=64k 2>"$dir/fio.err" &
    fio_pid=$!
    cleanup_fn stop_pid "$fio_pid" fio
    sleep 1
}

# check_backing: every fsynced block is there; [12M,16M) was forwarded.
check_backing ()
{
    cmp <(region "$dir/backing" 0 4) "$dir/known" ||
        fail "$1: fsynced blocks at [0,4M) lost"
    cmp <(region "$dir/backing" 8 4) "$dir/rewritten" ||
        fail "$1: fsynced rewrite at [8M,12M) lost (a discard landed on it?)"
    cmp <(region "$dir/backing" 12 4) <(head -c 4M /dev/zero) ||
        fail "$1: the trimmed range [12M,16M) was not forwarded at stop"
    wait_for_file "$dir/stats.json" || fail "$1: no statistics written at stop"
    [ "$(json_get "$dir/stats.json" pending_bytes)" -eq "$(json_get "$dir/stats.json" subgranule_bytes)" ] ||
        fail "$1: discards left pending after the stop"
}

echo "== A: SIGTERM while fio runs on the loop device"
prepare
background_io 60
kill -TERM "$DISCARDFUSE_PID"
await_exit "$DISCARDFUSE_PID" discardfuse SIGTERM || fail "SIGTERM: discardfuse exited with status $?"
grep -qF " $mnt fuse" /proc/mounts && fail "SIGTERM: still mounted"
stop_pid "$fio_pid" fio
echo "fio after the stop (errors expected): $(grep -c 'io_u error' "$dir/fio.err") I/O errors"
detach_loop "$dev" || fail "SIGTERM: $dev still holds the image"
check_backing "SIGTERM"

echo "== B: fusermount3 -u -z while fio runs on the loop device"
prepare
background_io 4
fusermount3 -u -z "$mnt" || fail "fusermount3 -u -z failed"
grep -qF " $mnt fuse" /proc/mounts && fail "lazy unmount: still in /proc/mounts"
kill -0 "$DISCARDFUSE_PID" || fail "lazy unmount: discardfuse stopped while loop still used it"
wait "$fio_pid" || { cat "$dir/fio.err" "$dir/fio.out"; fail "lazy unmount: fio saw errors"; }
kill -0 "$DISCARDFUSE_PID" || fail "lazy unmount: discardfuse stopped before losetup -d"
detach_loop "$dev" || fail "lazy unmount: $dev still holds the image"
await_exit "$DISCARDFUSE_PID" discardfuse "losetup -d" || fail "lazy unmount: discardfuse exited with status $?"
check_backing "lazy unmount"
echo "unmount under I/O: ok"
