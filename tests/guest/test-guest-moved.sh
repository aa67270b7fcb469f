#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The state file follows a disk, not its position (issue 35, item 4), in
# two guest boots (tests/guest/run): a SATA disk of serial dc-moved is
# /dev/sda in the first, where a clean stop saves its pending set, and
# /dev/sdb in the second, behind another disk, where the same set must
# load whole, while the other disk, now at /dev/sda, is refused it.
# The disk is named by its WWID (backend/stable-id.c).
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
guest_test_setup
guest_image moved 256M
moved=$IMAGE
guest_image other 256M
guest_run --kernel 6.1 --disk "sata:$moved:dc-moved" --timeout 300 -- \
    "$abs_top_srcdir/tests/guest/moved-disk.sh" save
guest_run --kernel 6.1 --disk "sata:$IMAGE:dc-other" \
    --disk "sata:$moved:dc-moved" --timeout 300 -- \
    "$abs_top_srcdir/tests/guest/moved-disk.sh" load
echo "moved disk: ok"
