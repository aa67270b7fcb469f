#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the concurrent verifier over a backend whose discards
# take 5 ms (nbd backend to nbdkit memory with the delay filter), with
# eager forwarding: many writes land on a range whose discard is in
# flight and must wait for it (invariant 1).  Without that wait the
# late discard wipes the write, and the verifier reads zeros.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"
requires "$NBDKIT" --filter=delay memory 1M --version

verify_setup
start_nbdkit -P "$TESTDIR/dev.pid" -U "$TESTDIR/dev.sock" \
    --filter=delay memory 64M delay-trim=5ms

# The run only means something if writes really met discards in flight.
# Whether a random write lands on a range in flight is chance: a short
# run (sanitizer builds scale the count down) may see none, so further
# runs with the next seeds follow until the waits add up, at most three.
wanted=$(( VERIFY_SCALE >= 100 ? 10 : 1 ))
waits=0
for round in 1 2 3; do
    name=slow-discard-$round
    verify_run "$name" "nbd+unix:///?socket=$TESTDIR/dev.sock" \
        "delay=0 idle=0 budget=off" --ops "$(verify_ops 40000)"
    verify_expect "$name" forwarded -gt 0
    waits=$(( waits + $(verify_stat "$name" write_waits) ))
    [ "$waits" -lt "$wanted" ] || break
    VERIFY_SEED=$(( VERIFY_SEED + 1 ))
done
[ "$waits" -ge "$wanted" ] ||
    fail "slow-discard: $waits writes met a discard in flight in $round runs, expected at least $wanted"
echo "verify slow discard: ok ($VERIFY_OPS_TOTAL operations verified, $waits writes waited)"
