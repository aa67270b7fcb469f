#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The card's line on an emulated SCSI disk, in a guest (tests/guest/run):
# Debian 12's 6.1 kernel, one vCPU, discard_granularity 64 KiB and
# discard_max_bytes 64 MiB (max_unmap_size): XFS against
# passthrough=true, then ext4.
# What it checks: tests/guest/card-disk.sh.
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
guest_test_setup
guest_image scsi 1G
guest_run --kernel 6.1 --disk "scsi:$IMAGE::max_unmap_size=67108864" --timeout 900 -- \
    "$abs_top_srcdir/tests/guest/card-disk.sh" scsi
