# SPDX-License-Identifier: BSD-3-Clause
# discardcache benchmarks: the baseline build, an older commit's plugin
# run beside this build's in the same run (sections 3 and 7).  A change
# that must leave the figures "within noise" (issue 34's moves) or cost
# writes at most 5% (issue 37's write-through) is then judged by a ratio
# measured on the same disk, the same minutes and the same load, not
# against a docs/benchmarks.md written hours earlier on a machine whose
# load has changed since.  Sourced by tests/bench/run after lib.sh.
#
# caa2b51 is main before the cache/ moves (issue 34) and before a write's
# cancel reached the journal's file ahead of the write (issue 37).
BENCH_BASELINE_DEFAULT=caa2b51

# bench_baseline REV PLUGIN: sets BASE_PLUGIN and BENCH_BASE ("yes", or
# why the baseline rows are empty) and BENCH_BASE_REV (its name in the
# report).  PLUGIN, when given, is a plugin built elsewhere (the smoke
# run passes this build's own); otherwise REV ("none": no baseline) is
# taken from git with `git archive` and built once with this build's
# configure arguments, the plugin alone, cached in the build directory.
bench_baseline ()
{
    local rev=$1 plugin=$2 sha dir
    BENCH_BASE=yes BASE_PLUGIN=$plugin BENCH_BASE_REV=$plugin
    [ -n "$plugin" ] && return 0
    if [ "$rev" = none ]; then
        BENCH_BASE="not run (--baseline none)"
        return 0
    fi
    if ! sha=$(git -C "$abs_top_srcdir" rev-parse --verify -q "$rev^{commit}"); then
        BENCH_BASE="not run: $rev is not a commit of $abs_top_srcdir (a checkout without history?)"
        return 0
    fi
    BENCH_BASE_REV=${sha:0:9}
    dir=$abs_top_builddir/tests/bench/baseline-$BENCH_BASE_REV
    BASE_PLUGIN=$dir/build/nbd-plugin/.libs/nbdkit-discardcache-plugin.so
    [ -e "$BASE_PLUGIN" ] && return 0
    progress "baseline: building $BENCH_BASE_REV's plugin in $dir (once)"
    rm -rf "$dir"
    mkdir -p "$dir/src" "$dir/build"
    local -a args
    eval "args=($(cd "$abs_top_builddir" && ./config.status --config))"
    if ! { git -C "$abs_top_srcdir" archive "$sha" | tar -x -C "$dir/src" &&
           (cd "$dir/src" && ./autogen.sh) &&
           (cd "$dir/build" && "$dir/src/configure" "${args[@]}" &&
            make -j"$(nproc)" nbd-plugin/nbdkit-discardcache-plugin.la); } \
         >"$dir/build.log" 2>&1; then
        tail -n 30 "$dir/build.log" >&2
        rm -f "$BASE_PLUGIN"
        fail "cannot build the baseline $BENCH_BASE_REV (log: $dir/build.log)"
    fi
}

# base_missing WORKLOAD CASE CONTENDER: the baseline's row when there is
# none (BENCH_BASE says why); nothing runs.
base_missing ()
{
    record --set=workload="$1" --set="case=$2" --set=contender="$3" --set=rep=1 \
        --set=status="$BENCH_BASE"
}

# skip_base REP WORKLOAD CASE KIND: true (and the row recorded once) if
# KIND is a baseline contender and there is no baseline.
skip_base ()
{
    [[ $4 == *-base ]] && [ "$BENCH_BASE" != yes ] || return 1
    [ "$1" = 1 ] && base_missing "$2" "$3" "$4"
    return 0
}
