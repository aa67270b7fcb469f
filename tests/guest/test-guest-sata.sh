#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The card's line on an emulated SATA disk, in a guest (tests/guest/run):
# Debian 12's 6.1 kernel, one vCPU: XFS and ext4 each against
# passthrough=true, and nbdkit's file plugin, which sends this disk (no
# write-zeroes) no discard at all.
# What it checks: tests/guest/card-disk.sh.
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
guest_test_setup
guest_image sata 1G
guest_run --kernel 6.1 --disk "sata:$IMAGE" --timeout 900 -- \
    "$abs_top_srcdir/tests/guest/card-disk.sh" sata --ext4-passthrough --file
