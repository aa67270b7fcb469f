# SPDX-License-Identifier: BSD-3-Clause
# discardcache: running the concurrent verifier (tests/verifier/) against
# the plugin, shared by the tests/test-verify-*.sh scripts.
# Source tests/functions.sh first.
#
# One run: start the plugin on a backend, drive the random workload
# (checking every block at checkpoints), save the model, stop the plugin
# with SIGTERM (engine_stop forwards every pending discard), start it
# again on the same backend and check every block once more.
#
# Environment:
#   VERIFY_SEED=N      the seed (default: from the clock; always printed)
#   VERIFY_SCALE=PCT   percentage of the usual number of operations
#                      (sanitizer builds run fewer; soak runs more)
#   VERIFY_RESTART_KEYS  plugin keys the checking server needs too (thin
#                      mode: thin=on size=... meta=...)

VERIFY=$abs_top_builddir/tests/verifier/verify
[ -x "$VERIFY" ] || fail "$VERIFY is missing: build first (make check)"
requires "$NBDKIT" --version

: "${VERIFY_SEED:=$(( $(date +%s) % 100000 ))}"
: "${VERIFY_SCALE:=100}"
VERIFY_OPS_TOTAL=0

# verify_ops N: N scaled by VERIFY_SCALE (at least 500).
verify_ops ()
{
    local n=$(( $1 * VERIFY_SCALE / 100 ))
    [ "$n" -ge 500 ] || n=500
    echo "$n"
}

# verify_setup: TESTDIR and FASTDIR (fast_scratch_setup, functions.sh).
verify_setup ()
{
    fast_scratch_setup
}

# verify_run NAME BACKEND "PLUGIN KEYS" [VERIFY OPTIONS...]
# Leaves the statistics of the first server in $TESTDIR/NAME.stats.json
# and the verifier's result line in $TESTDIR/NAME.result.
verify_run ()
{
    local name=$1 backend=$2 keys=$3 dir=$TESTDIR start=$SECONDS
    shift 3
    local -a pkeys
    read -r -a pkeys <<< "$keys"

    echo "== $name: backend=$backend $keys (seed $VERIFY_SEED)"
    start_nbdkit -P "$dir/$name.pid" -U "$dir/$name.sock" "$PLUGIN" \
        backend="$backend" "${pkeys[@]}" statsfile="$dir/$name.stats.json"
    "$VERIFY" --uri "nbd+unix:///?socket=$dir/$name.sock" \
        --seed "$VERIFY_SEED" --save-model "$dir/$name.model" "$@" \
        > "$dir/$name.out" || verify_failed "$name" "$dir/$name.out"
    cat "$dir/$name.out"
    stop_pidfile "$dir/$name.pid" nbdkit
    wait_for_file "$dir/$name.stats.json" || fail "$name: no statistics"
    cat "$dir/$name.stats.json"

    # A fresh server on the same backend: everything forwarded at the
    # stop has landed, and no acknowledged write may be missing.
    local -a rkeys
    read -r -a rkeys <<< "${VERIFY_RESTART_KEYS:-}"
    start_nbdkit -P "$dir/$name.check.pid" -U "$dir/$name.check.sock" \
        "$PLUGIN" backend="$backend" "${rkeys[@]}"
    "$VERIFY" --uri "nbd+unix:///?socket=$dir/$name.check.sock" \
        --load-model "$dir/$name.model" --verify-only \
        > "$dir/$name.check.out" ||
        verify_failed "$name (after restart)" "$dir/$name.check.out"
    stop_pidfile "$dir/$name.check.pid" nbdkit
    grep '^verify-result:' "$dir/$name.out" > "$dir/$name.result"
    VERIFY_OPS_TOTAL=$(( VERIFY_OPS_TOTAL + $(verify_result "$name" ops) ))
    echo "$name: ok, $(verify_result "$name" ops) operations, after restart" \
         "$(verify_result_of "$dir/$name.check.out" checked) blocks checked" \
         "($(( SECONDS - start )) s)"
}

# verify_run_file NAME "PLUGIN KEYS" [VERIFY OPTIONS...]: verify_run on
# a fresh sparse 64 MiB file in FASTDIR.
verify_run_file ()
{
    local name=$1
    shift
    truncate -s 64M "$FASTDIR/$name.img"
    verify_run "$name" "$FASTDIR/$name.img" "$@"
}

verify_failed ()
{
    cat "$2"
    fail "$1: the verifier found a problem (reproduce with VERIFY_SEED=$VERIFY_SEED)"
}

# verify_result_of FILE KEY: a value from a verify-result line.
verify_result_of ()
{
    sed -n "s/^verify-result:.* $2=\([^ ]*\).*/\1/p" "$1"
}

# verify_result NAME KEY: the same from run NAME.
verify_result ()
{
    verify_result_of "$TESTDIR/$1.out" "$2"
}

# verify_stat NAME KEY: a statistic of the first server of run NAME.
verify_stat ()
{
    json_get "$TESTDIR/$1.stats.json" "$2"
}

# verify_expect NAME KEY OP VALUE: fail unless the statistic compares.
verify_expect ()
{
    local v
    v=$(verify_stat "$1" "$2")
    case $v in True) v=1 ;; False) v=0 ;; esac
    [ "$v" "$3" "$4" ] || fail "$1: $2 is $v, expected $3 $4"
}
