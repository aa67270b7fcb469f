#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The card's line on an emulated NVMe disk, in a guest (tests/guest/run):
# bookworm-security's 6.12 kernel, one vCPU: XFS against
# passthrough=true, then ext4.
# What it checks: tests/guest/card-disk.sh.
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
guest_test_setup
guest_image nvme 1G
guest_run --kernel 6.12 --disk "nvme:$IMAGE" --timeout 900 -- \
    "$abs_top_srcdir/tests/guest/card-disk.sh" nvme
