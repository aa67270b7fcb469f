#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the concurrent verifier with passthrough=true, the
# baseline that forwards every trim before it answers.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"

verify_setup
verify_run_file passthrough "passthrough=true" --ops "$(verify_ops 30000)"
verify_expect passthrough cancelled_by_writes -eq 0
verify_expect passthrough pending_extents -eq 0
[ "$(verify_stat passthrough forwarded)" -ge "$(verify_result passthrough trims)" ] ||
    fail "passthrough: fewer discards forwarded than trims received"
echo "verify passthrough: ok ($VERIFY_OPS_TOTAL operations verified)"
