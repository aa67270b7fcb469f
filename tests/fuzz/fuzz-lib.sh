# SPDX-License-Identifier: BSD-3-Clause
# discardcache: running the libFuzzer targets, shared by
# tests/fuzz/test-fuzzers.sh (make check) and tests/fuzz/run-fuzzers.
# Source tests/functions.sh first.

# fuzz_targets: the names NAME with a committed corpus-NAME/.
fuzz_targets ()
{
    local c
    for c in "$abs_top_srcdir"/tests/fuzz/corpus-*/; do
        [ -d "$c" ] || continue
        c=${c%/}
        echo "${c##*/corpus-}"
    done
}

# fuzz_run NAME SECONDS WORKDIR [LIBFUZZER OPTIONS...]: run target NAME
# for SECONDS on a copy of its corpus in WORKDIR (new inputs land there,
# never in the source tree).  Sets FUZZ_EXECS; on a crash, saves the
# input next to the program, prints how to reproduce it, and fails.
fuzz_run ()
{
    local name=$1 secs=$2 work=$3 prog opts=()
    shift 3
    prog=$abs_top_builddir/tests/fuzz/fuzz-$name
    [ -x "$prog" ] || fail "$prog is missing: configure with CC=clang and build"
    [ -f "$abs_top_srcdir/tests/fuzz/$name.options" ] &&
        mapfile -t opts < "$abs_top_srcdir/tests/fuzz/$name.options"
    mkdir -p "$work/corpus" "$work/artifacts"
    if ! "$prog" -max_total_time="$secs" -print_final_stats=1 \
           -artifact_prefix="$work/artifacts/" "${opts[@]}" "$@" \
           "$work/corpus" "$abs_top_srcdir/tests/fuzz/corpus-$name" \
           > "$work/log" 2>&1; then
        tail -n 40 "$work/log"
        local a
        for a in "$work"/artifacts/*; do
            [ -e "$a" ] || continue
            cp "$a" "$abs_top_builddir/tests/fuzz/" &&
                echo "crash input kept: $abs_top_builddir/tests/fuzz/${a##*/}" \
                     "(reproduce: $prog $abs_top_builddir/tests/fuzz/${a##*/})"
        done
        fail "fuzz-$name found a problem"
    fi
    FUZZ_EXECS=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n1)
    FUZZ_EXECS=${FUZZ_EXECS:-0}
}
