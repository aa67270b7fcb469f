#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the concurrent verifier against a sparse file with
# forwarding as eager as it gets (delay=0 idle=0 budget=off: the flusher
# sends each trim the moment it lands, unpaced, so writes meet discards
# in flight), then with
# flush-discards=true (every client FLUSH drains the cache).  A discard
# sent over newer data would read back as zeros, a stale write as an
# older version: either fails the run.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"

verify_setup
# On the real file system of TESTDIR: hole punching as ext4/xfs do it.
truncate -s 64M "$TESTDIR/eager.img"
verify_run eager "$TESTDIR/eager.img" "delay=0 idle=0 budget=off" \
    --ops "$(verify_ops 60000)" --checkpoint "$(verify_ops 20000)"
verify_expect eager forwarded -gt 0
verify_expect eager cancelled_by_writes -gt 0

verify_run_file flush-discards "delay=20ms idle=1ms flush-discards=true" \
    --ops "$(verify_ops 30000)" --mix 40,30,12,8,10
verify_expect flush-discards forwarded -gt 0
echo "verify eager: ok ($VERIFY_OPS_TOTAL operations verified)"
