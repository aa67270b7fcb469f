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
# Invariant 2, byte for byte: every trimmed byte was forwarded, or was
# part of a sub-granule edge the backend cannot discard, counted.
trimmed=$(verify_stat passthrough trim_bytes)
forwarded=$(verify_stat passthrough forwarded_bytes)
fragments=$(verify_stat passthrough dropped_fragment_bytes)
dropped=$(verify_stat passthrough dropped_bytes)
[ "$dropped" -eq "$fragments" ] ||
    fail "passthrough: $dropped bytes dropped, not only the $fragments of sub-granule edges"
[ $(( forwarded + fragments )) -eq "$trimmed" ] ||
    fail "passthrough: $forwarded bytes forwarded + $fragments edges, not the $trimmed trimmed"
echo "verify passthrough: ok ($VERIFY_OPS_TOTAL operations verified)"
