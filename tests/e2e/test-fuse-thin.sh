#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardfuse in thin mode: the image is the exported size (twice the
# backing file); written data reads back and unwritten slots read as
# zeros; a hole punch of whole slots unmaps them (stats node); bad thin
# keys are refused naming the key; after a remount from meta= the data
# and the mapping are still there.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_fuse
requires fallocate --version

mktempdir
dir=$TESTDIR
mnt=$dir/mnt
mkdir "$mnt"
head -c 16M /dev/urandom > "$dir/backing"
keys=(backend="$dir/backing" thin=on slot=64k size=32M meta="$dir/meta"
      delay=1h ctl=none)

# Refused, naming the key, nothing mounted.
for bad in "thin=on" "slot=3000" "size=0" "meta=$dir/m2" "thin=on slot=1k meta=$dir/m3"; do
    read -r -a args <<< "$bad"
    if timeout 60 "$DISCARDFUSE" -f backend="$dir/backing" "${args[@]}" \
           "$mnt" > "$dir/out" 2>&1; then
        fusermount3 -u "$mnt" 2>/dev/null
        fail "accepted: $bad"
    fi
    grep -qE "meta|slot|size" "$dir/out" || { cat "$dir/out"; fail "$bad: no clear error"; }
    echo "ok: $bad -> $(head -n 1 "$dir/out")"
done

start_discardfuse "$mnt" "${keys[@]}"
[ "$(stat -c %s "$mnt/disk")" -eq $((32 * 1024 * 1024)) ] ||
    fail "disk is $(stat -c %s "$mnt/disk") bytes, expected the exported 32M"
head -c 1M /dev/urandom > "$dir/data"
dd if="$dir/data" of="$mnt/disk" bs=64k seek=400 conv=notrunc,fsync status=none ||
    fail "write failed"
cmp <(dd if="$mnt/disk" bs=64k skip=400 count=16 status=none) "$dir/data" ||
    fail "written data does not read back"
cmp <(dd if="$mnt/disk" bs=64k skip=100 count=16 status=none) \
    <(head -c 1M /dev/zero) || fail "unwritten slots do not read as zeros"
[ "$(json_get "$mnt/stats" thin_mapped)" -eq 16 ] ||
    fail "thin_mapped is $(json_get "$mnt/stats" thin_mapped), expected 16"
fallocate -p -o $((408 * 65536)) -l $((8 * 65536)) "$mnt/disk" ||
    fail "hole punch failed"
[ "$(json_get "$mnt/stats" thin_mapped)" -eq 8 ] ||
    fail "after the punch thin_mapped is $(json_get "$mnt/stats" thin_mapped)"
sync "$mnt/disk"
stop_discardfuse "$mnt" "$DISCARDFUSE_PID" || fail "discardfuse exited with status $?"

start_discardfuse "$mnt" "${keys[@]}"
cmp <(dd if="$mnt/disk" bs=64k skip=400 count=8 status=none) \
    <(head -c 512K "$dir/data") || fail "data lost across the remount"
cmp <(dd if="$mnt/disk" bs=64k skip=408 count=8 status=none) \
    <(head -c 512K /dev/zero) || fail "punched slots do not read as zeros"
[ "$(json_get "$mnt/stats" thin_mapped)" -eq 8 ] ||
    fail "after the remount thin_mapped is $(json_get "$mnt/stats" thin_mapped)"
stop_discardfuse "$mnt" "$DISCARDFUSE_PID" || fail "discardfuse exited with status $?"
echo "fuse thin: ok"
