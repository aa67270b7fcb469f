#!/usr/bin/env bash
# discardcache: each libFuzzer target runs for FUZZ_SECONDS (default 10)
# from its committed seed corpus; a crash, a leak or a difference from
# the reference fails the test and keeps the input.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/fuzz/fuzz-lib.sh"
: "${FUZZ_SECONDS:=10}"

mktempdir
n=0
for name in $(fuzz_targets); do
    fuzz_run "$name" "$FUZZ_SECONDS" "$TESTDIR/$name"
    echo "fuzz-$name: $FUZZ_EXECS executions in $FUZZ_SECONDS s, no crash"
    n=$((n + 1))
done
[ "$n" -gt 0 ] || fail "no fuzz target has a corpus"
