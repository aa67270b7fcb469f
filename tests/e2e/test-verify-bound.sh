#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the concurrent verifier with a tiny memory bound
# (max-extents=16), under both on-full policies: the engine forwards or
# drops the oldest extents from inside the trim path, splitting and
# cutting granules as it goes, while writes keep cancelling.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"

verify_setup
for policy in forward drop; do
    verify_run_file "bound-$policy" \
        "delay=50ms idle=0 max-extents=16 on-full=$policy" \
        --ops "$(verify_ops 30000)"
done
verify_expect bound-forward forwarded -gt 0
verify_expect bound-drop dropped_full_bytes -gt 0
echo "verify bound: ok ($VERIFY_OPS_TOTAL operations verified)"
