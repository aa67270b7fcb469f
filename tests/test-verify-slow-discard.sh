#!/usr/bin/env bash
# discardcache: the concurrent verifier over a backend whose discards
# take 5 ms (nbd backend to nbdkit memory with the delay filter), with
# eager forwarding: many writes land on a range whose discard is in
# flight and must wait for it (invariant 1).  Without that wait the
# late discard wipes the write, and the verifier reads zeros.
source "${abs_top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
source "$abs_top_srcdir/tests/verify-lib.sh"
requires "$NBDKIT" --filter=delay memory 1M --version

verify_setup
start_nbdkit -P "$TESTDIR/dev.pid" -U "$TESTDIR/dev.sock" \
    --filter=delay memory 64M delay-trim=5ms
verify_run slow-discard "nbd+unix:///?socket=$TESTDIR/dev.sock" \
    "delay=0 idle=0" --ops "$(verify_ops 40000)"
verify_expect slow-discard forwarded -gt 0
# The run only means something if writes really met discards in flight.
verify_expect slow-discard write_waits -ge $(( VERIFY_SCALE >= 100 ? 10 : 1 ))
echo "verify slow discard: ok ($VERIFY_OPS_TOTAL operations verified)"
