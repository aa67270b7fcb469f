#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the concurrent verifier with a coarse granularity (64k)
# under 4 KiB and sector-cut trims: pending pieces smaller than a granule
# wait for their neighbours, merged granules go out aligned inward, and
# a write inside a granule splits it again.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"

verify_setup
verify_run_file granularity "delay=0 idle=0 granularity=64k" \
    --ops "$(verify_ops 50000)" --max-blocks 4 --unaligned 30
verify_expect granularity forwarded -gt 0
verify_expect granularity granularity -eq 65536
echo "verify granularity: ok ($VERIFY_OPS_TOTAL operations verified)"
