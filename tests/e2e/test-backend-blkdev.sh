#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the block device backend on a real loop device over a
# sparse file: BLKDISCARD really sent (the backing file loses blocks),
# limits equal to /sys, zero, exclusive open.  Needs root and a free
# loop device (skipped without them, a failure when CI=true).
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
set -e
set -u

requires_root
requires losetup --version
[ -e /dev/loop-control ] || skip "no /dev/loop-control (loop module?)"
prog=${abs_top_builddir:-$PWD}/tests/unit/test-backend-blkdev

mktempdir
dir=$TESTDIR
backing=$dir/backing.img
truncate -s 64M "$backing"
dev=$(losetup -f --show "$backing") ||
    skip "cannot attach a loop device to $backing"
cleanup_fn losetup -d "$dev"

queue=/sys/block/${dev#/dev/}/queue
if [ "$(cat "$queue/discard_max_bytes")" = 0 ]; then
    skip "$dev has no discard: the file system of $dir cannot punch holes"
fi

"$prog" "$dev" "$backing" || exit 1
