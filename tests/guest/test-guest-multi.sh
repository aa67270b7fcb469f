#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# In a guest with two vCPUs (bookworm-security's 6.12 kernel) and two
# emulated SATA disks: the card's line with `nbd-client -C 4` (the
# writes use more than one connection), and the project's verifier
# through qemu-nbd on /dev/nbd0 in front of discardcache, checked again
# after a restart.  What it checks: tests/guest/card-multi.sh.
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
guest_test_setup
[ -x "$abs_top_builddir/tests/verifier/verify" ] ||
    fail "$abs_top_builddir/tests/verifier/verify is missing: build first (make check)"
guest_image disk 1G
disk=$IMAGE
guest_image verify 64M
guest_run --kernel 6.12 --smp 2 --disk "sata:$disk" --disk "sata:$IMAGE" --timeout 900 -- \
    "$abs_top_srcdir/tests/guest/card-multi.sh"
