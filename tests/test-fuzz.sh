#!/usr/bin/env bash
# discardcache: a short libFuzzer run of each fuzz target (the control
# request parser, the state file loader, thin mode's meta file loader)
# from its seed corpus, under ASan and UBSan.  New inputs go to a
# scratch directory; a crash leaves its input there and fails the test.  FUZZ_RUNS=N and FUZZ_SECONDS=S
# (at most S seconds a target, 60 by default) run longer.
source "${abs_top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"

fuzzers=(ctl-proto state thin)
if [ ! -x "$abs_top_builddir/tests/fuzz/fuzz-state" ]; then
    # Not built: configure found no clang with libFuzzer.  Under CI that
    # is a failure when scripts/install-deps installs clang.
    if [ "${CI:-}" = true ] && grep -qw clang "$abs_top_srcdir/scripts/install-deps"; then
        fail "fuzz targets not built under CI, though scripts/install-deps installs clang"
    fi
    echo "$0: SKIP: no clang with -fsanitize=fuzzer (configure FUZZ_CC=...)" >&2
    exit 77
fi

mktempdir
for f in "${fuzzers[@]}"; do
    mkdir "$TESTDIR/new-$f"
    timeout 300 "$abs_top_builddir/tests/fuzz/fuzz-$f" \
        -runs="${FUZZ_RUNS:-20000}" -max_total_time="${FUZZ_SECONDS:-60}" -max_len=8192 \
        -artifact_prefix="$TESTDIR/" \
        "$TESTDIR/new-$f" "$abs_top_srcdir/tests/fuzz/corpus-$f" \
        >"$TESTDIR/$f.log" 2>&1 ||
        { tail -n 50 "$TESTDIR/$f.log"; fail "fuzz-$f found a crash (or did not run)"; }
    tail -n 2 "$TESTDIR/$f.log"
done
echo "fuzz: ok"
