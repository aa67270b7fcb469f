#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardfuse: what the mount offers and how each request maps.
#   - disk and stats, with the right sizes and modes; stats is JSON,
#     read-only and what discardctl stats --file shows; the image cannot
#     be resized
#   - statfs f_bsize = the engine's granularity, and loop takes it as
#     its discard_granularity
#   - 1 MiB direct writes reach the engine whole (max_write negotiated)
#   - reads past the end see EOF, writes past it ENOSPC
#   - fallocate: PUNCH_HOLE is a trim, ZERO_RANGE zeroes, others refused
#   - through loop + XFS, fstrim moves the trim counters in stats
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires_fuse
requires_loop
requires mkfs.xfs -V
requires fstrim --version
requires fallocate --version

mktempdir
dir=$TESTDIR
mnt=$dir/mnt
size=$((512 * 1024 * 1024))
truncate -s "$size" "$dir/backing"
mkdir "$mnt" "$dir/fs"
# -d: libfuse logs each request with its size.
start_discardfuse "$mnt" backend="$dir/backing" granularity=64k delay=60s \
    -d 2>"$dir/fuse.log"

stat_of () { json_get "$dir/stats.json" "$1"; }
snapshot () { cat "$mnt/stats" > "$dir/stats.json" || fail "cannot read $mnt/stats"; }

# The tree.
[ "$(ls "$mnt" | tr '\n' ' ')" = "disk stats " ] || fail "mount holds: $(ls "$mnt")"
[ "$(stat -c %s "$mnt/disk")" -eq "$size" ] || fail "disk size $(stat -c %s "$mnt/disk"), want $size"
[ "$(stat -c %a "$mnt/disk")" = 600 ] || fail "disk mode $(stat -c %a "$mnt/disk")"
[ "$(stat -c %a "$mnt/stats")" = 444 ] || fail "stats mode $(stat -c %a "$mnt/stats")"

# stats: JSON, getattr reports the length of the last read (it does not
# compute the statistics), read-only.
python3 -m json.tool "$mnt/stats" >/dev/null || fail "stats is not JSON"
len=$(wc -c < "$mnt/stats")
[ "$(stat -c %s "$mnt/stats")" -eq "$len" ] || fail "stats size $(stat -c %s "$mnt/stats") is not the last read's, $len"
snapshot
[ "$(stat_of granularity)" -eq 65536 ] || fail "granularity $(stat_of granularity)"
echo x 2>/dev/null > "$mnt/stats" && fail "stats accepted a write"
# discardctl reads it as it reads a statsfile, without the control socket.
"$DISCARDCTL" stats --file="$mnt/stats" >"$dir/table" ||
    fail "discardctl stats --file=$mnt/stats failed"
grep -q "^  granularity: *64.0 KiB" "$dir/table" ||
    fail "discardctl's table of $mnt/stats: $(cat "$dir/table")"
truncate -s 0 "$mnt/disk" 2>/dev/null && fail "disk was truncated"
truncate -s "$size" "$mnt/disk" || fail "truncate to its own size refused"
touch "$mnt/disk" || fail "touch refused"

# statfs: the engine's granularity, for loop.
[ "$(stat -f -c %S "$mnt")" -eq 65536 ] || fail "statfs block size $(stat -f -c %S "$mnt"), want 65536"

# 1 MiB direct writes arrive whole; data reads back.
head -c $((4 * 1024 * 1024)) /dev/urandom > "$dir/rand"
dd if="$dir/rand" of="$mnt/disk" bs=4M oflag=direct conv=notrunc status=none || fail "write failed"
cmp <(dd if="$mnt/disk" bs=1M count=4 iflag=direct status=none) "$dir/rand" || fail "read back differs"
largest=$(sed -n 's/.*opcode: WRITE.*insize: \([0-9]*\).*/\1/p' "$dir/fuse.log" | sort -n | tail -n 1)
echo "largest FUSE write request: $largest bytes (with its 80-byte header)"
[ "${largest:-0}" -ge $((1024 * 1024)) ] || fail "no 1 MiB write reached discardfuse (max_write not negotiated)"

# The end of the image.
[ "$(dd if="$mnt/disk" bs=4096 skip=$((size / 4096)) count=1 iflag=direct status=none | wc -c)" -eq 0 ] ||
    fail "a read past the end returned data"
dd if=/dev/zero of="$mnt/disk" bs=4096 seek=$((size / 4096)) count=1 oflag=direct conv=notrunc \
    2>"$dir/err" && fail "a write past the end succeeded"
grep -q "No space left" "$dir/err" || fail "a write past the end: $(cat "$dir/err")"

# fallocate.
fallocate -p -o 0 -l 1M "$mnt/disk" || fail "punch hole failed"
snapshot
[ "$(stat_of trims)" -eq 1 ] && [ "$(stat_of pending_bytes)" -eq $((1024 * 1024)) ] ||
    fail "punch hole did not become one pending 1 MiB trim"
fallocate -z -o 1M -l 1M "$mnt/disk" || fail "zero range failed"
cmp <(dd if="$mnt/disk" bs=1M skip=1 count=1 iflag=direct status=none) <(head -c 1M /dev/zero) ||
    fail "zero range does not read back as zeros"
dd if="$dir/rand" of="$mnt/disk" bs=64k count=1 oflag=direct conv=notrunc status=none
snapshot
[ "$(stat_of cancelled_by_writes)" -eq 65536 ] || fail "a write did not cancel the pending trim under it"
for opts in "-o 0 -l 4096" "-c -o 0 -l 65536" "-i -o 0 -l 65536"; do
    # shellcheck disable=SC2086
    fallocate $opts "$mnt/disk" 2>"$dir/err" && fail "fallocate $opts succeeded"
    grep -q "not supported" "$dir/err" || fail "fallocate $opts: $(cat "$dir/err")"
done

# Through loop: discard_granularity from statfs; fstrim moves the counters.
attach_loop "$mnt/disk" || fail "losetup failed"
dev=$LOOP_DEV
gran=$(cat "/sys/block/${dev#/dev/}/queue/discard_granularity")
[ "$gran" -eq 65536 ] || fail "loop discard_granularity $gran, want 65536"
mkfs.xfs -q -f -K "$dev" || fail "mkfs.xfs failed"
mount -o discard "$dev" "$dir/fs" || fail "mount failed"
cleanup_fn umount_if_mounted "$dir/fs"
dd if=/dev/urandom of="$dir/fs/file" bs=1M count=16 conv=fsync status=none
snapshot
before=$(stat_of trims)
rm "$dir/fs/file"
fstrim "$dir/fs" || fail "fstrim failed"
snapshot
after=$(stat_of trims)
echo "trims before rm + fstrim: $before, after: $after"
[ "$after" -gt "$before" ] || fail "fstrim did not show in stats"
umount "$dir/fs"
detach_loop "$dev" || fail "$dev still holds $mnt/disk"
stop_discardfuse "$mnt" "$DISCARDFUSE_PID" || fail "discardfuse exited with status $?"
echo "fuse ops: ok"
