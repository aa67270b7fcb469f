#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: each libFuzzer target (the extent map against its
# reference model, the control request parser, the state file loader,
# thin mode's meta file loader, the journal of the pending set)
# runs for FUZZ_SECONDS (default 10) from its committed seed corpus,
# under ASan and UBSan; a crash, a leak or a difference from the
# reference fails the test and keeps the input.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/fuzz/fuzz-lib.sh"
: "${FUZZ_SECONDS:=10}"

if [ ! -x "$abs_top_builddir/tests/fuzz/fuzz-extmap" ]; then
    # Not built: no clang with libFuzzer, or --disable-fuzzing.
    skip "fuzz targets not built (configure found no FUZZ_CC with -fsanitize=fuzzer, or --disable-fuzzing)"
fi

mktempdir
n=0
for name in $(fuzz_targets); do
    fuzz_run "$name" "$FUZZ_SECONDS" "$TESTDIR/$name"
    echo "fuzz-$name: $FUZZ_EXECS executions in $FUZZ_SECONDS s, no crash"
    n=$((n + 1))
done
[ "$n" -ge 5 ] || fail "expected 5 fuzz targets with a corpus, ran $n"
