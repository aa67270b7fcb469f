#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardublk in a guest (tests/guest/run): bookworm-security's 6.12
# kernel (Debian's 6.1 has no ublk), one vCPU, an emulated NVMe disk as
# the backend (and a small one for the verifier).  What it checks:
# tests/guest/ublk-guest.sh (the device's limits and data path, the
# verifier through it with O_DIRECT, XFS and ext4 with -o discard, churn, fstrim,
# flush and stats, a restart; 10 kill -9 + --recover and 10 SIGTERM
# --keep + --recover under a writer that fsyncs, with 0 errors and every
# file intact).
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
[ -x "$abs_top_builddir/ublk/discardublk" ] ||
    skip "discardublk not built (configure found no liburing: apt-get install liburing-dev)"
guest_test_setup
guest_image nvme 1G
disk=$IMAGE
guest_image nvme-verify 64M
guest_run --kernel 6.12 --disk "nvme:$disk" --disk "nvme:$IMAGE" --timeout 900 -- \
    "$abs_top_srcdir/tests/guest/ublk-guest.sh"
