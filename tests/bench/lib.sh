# discardcache benchmarks: servers, the slow-TRIM device model, the
# contenders and the clients, for tests/bench/run.  Source
# tests/functions.sh and tests/e2e-lib.sh first.
#
# Every server is started here with spawn_nbdkit and kept in a list; one
# exit hook (registered by bench_init) stops whatever is still running,
# newest first, by pid only.  bench_stop takes a server off the list.
# shellcheck disable=SC2034  # the BENCH_* results are read by the caller

# bench_init DIR: scratch directory for sockets, logs and statistics.
bench_init ()
{
    BENCH_DIR=$1
    declare -ga _bench_names=()
    declare -gA _bench_pids=()
    cleanup_fn bench_stop_all
}

bench_sock () { echo "$BENCH_DIR/$1.sock"; }
bench_uri () { echo "nbd+unix:///?socket=$BENCH_DIR/$1.sock"; }

# bench_start NAME NBDKIT-ARGS...: nbdkit -U DIR/NAME.sock, kept in the list.
bench_start ()
{
    local name=$1
    shift
    rm -f "$BENCH_DIR/$name.sock" "$BENCH_DIR/$name.pid"
    spawn_nbdkit -U "$BENCH_DIR/$name.sock" -P "$BENCH_DIR/$name.pid" "$@"
    _bench_names+=("$name")
    _bench_pids[$name]=$NBDKIT_PID
    wait_nbdkit -U "$BENCH_DIR/$name.sock" -P "$BENCH_DIR/$name.pid" "$@"
}

# bench_stop NAME: SIGTERM, wait for the exit (stop_pid fails the run if
# that takes over 60 s); the seconds it took go to BENCH_STOP_SECS.  For
# discardcache that is the final flush: engine_stop forwards everything
# pending before nbdkit exits and writes statsfile=.
bench_stop ()
{
    local name=$1 t0
    BENCH_STOP_SECS=0
    [ -n "${_bench_pids[$name]:-}" ] || return 0
    t0=$(bench_now)
    stop_pid "${_bench_pids[$name]}" "nbdkit $name"
    BENCH_STOP_SECS=$(bench_elapsed "$t0")
    unset "_bench_pids[$name]"
}

bench_stop_all ()
{
    local i name
    for (( i = ${#_bench_names[@]} - 1; i >= 0; i-- )); do
        name=${_bench_names[i]}
        [ -n "${_bench_pids[$name]:-}" ] && bench_stop "$name"
    done
    return 0
}

# bench_pid NAME: the pid of a running server.
bench_pid () { echo "${_bench_pids[$1]}"; }

# Wall-clock seconds (the device log's timestamps are wall-clock too).
bench_now () { date +%s.%N; }
bench_elapsed () { python3 -c 'import sys,time; print("%.3f" % (time.time() - float(sys.argv[1])))' "$1"; }

# ---- the device ----

# bench_device NAME DELAY PLUGIN-ARGS...: the slow, non-queued TRIM device
# of DESIGN.md: one request at a time (noparallel serialize=all-requests),
# each TRIM taking DELAY (delay-trim).  The log filter sits inside
# noparallel, so each Trim line's timestamp is when the device starts
# that command: the discard timeline.  It logs writes too, which costs
# the device some write speed, the same for every contender.
bench_device ()
{
    local name=$1 delay=$2
    shift 2
    bench_start "$name" --filter=noparallel --filter=log --filter=delay "$@" \
        serialize=all-requests delay-trim="$delay" logfile="$BENCH_DIR/$name.log"
}

# ---- the contenders ----
#
#   nodiscard  nbdkit nbd (nbdkit's own proxy); the client sends no TRIM
#              at all (fio: no trim job; XFS: mounted without -o discard)
#   dc-nodiscard  the same client through discardcache (its data path is
#              not nbdkit nbd's: this isolates what TRIMs cost it)
#   nbd        nbdkit nbd: every TRIM passed straight to the device
#   dc         nbdkit discardcache, default keys
#   dc-pt      nbdkit discardcache passthrough=true: our overhead alone
#   file       nbdkit file FILE (data-path rows: the device is a file)
#
# HOOK(discardfuse): a contender "fuse" is the discardfuse mount instead of
# an nbdkit server: start it in bench_contender (backend=the device URI,
# statsfile= as for dc) and, in the filesystem rows, losetup its image
# file instead of e2e_attach's nbdfuse file (see bench_fs_attach).

# bench_contender NAME KIND BACKEND [KEYS...]: start contender KIND in
# front of BACKEND (an NBD URI, or a file for "file"), as server NAME,
# under any extra nbdkit options in BENCH_FRONT_FILTERS (an array).
# discardcache writes its statistics to DIR/NAME.stats.json.
bench_contender ()
{
    local name=$1 kind=$2 backend=$3
    shift 3
    local -a front=("${BENCH_FRONT_FILTERS[@]}")
    rm -f "$BENCH_DIR/$name.stats.json"
    case $kind in
    nodiscard|nbd)
        bench_start "$name" "${front[@]}" nbd uri="$backend" "$@" ;;
    file)
        bench_start "$name" "${front[@]}" file "$backend" "$@" ;;
    dc|dc-nodiscard)
        bench_start "$name" "${front[@]}" "$PLUGIN" backend="$backend" \
            statsfile="$BENCH_DIR/$name.stats.json" "$@" ;;
    dc-pt)
        bench_start "$name" "${front[@]}" "$PLUGIN" backend="$backend" \
            passthrough=true statsfile="$BENCH_DIR/$name.stats.json" "$@" ;;
    *)
        fail "bench_contender: unknown contender $kind" ;;
    esac
}

# bench_final_flush NAME: everything the contender still holds reaches the
# device; the seconds it took go to BENCH_FLUSH_SECS.  For now by
# stopping nbdkit (engine_stop forwards everything pending).
#
# HOOK(discardctl): with tools/discardctl, start dc contenders with
# ctl=$BENCH_DIR/NAME.ctl and time this instead, then stop:
#     discardctl -s "$BENCH_DIR/$name.ctl" stats >"$BENCH_DIR/$name.before.json"
#     t0=$(bench_now); discardctl -s "$BENCH_DIR/$name.ctl" flush --wait
#     BENCH_FLUSH_SECS=$(bench_elapsed "$t0")
# (the "before" statistics give the bytes pending at the end of the run
# directly; bench.py record --stats-before would read them).
bench_final_flush ()
{
    bench_stop "$1"
    BENCH_FLUSH_SECS=$BENCH_STOP_SECS
}

# ---- clients ----

# bench_fio OUT.json URI FIO-ARGS...: fio's nbd engine against URI, JSON
# to OUT.json.  Sets BENCH_FIO_T0, when it started (wall clock).
bench_fio ()
{
    local out=$1 uri=$2
    shift 2
    BENCH_FIO_T0=$(bench_now)
    fio --output-format=json --output="$out" --ioengine=nbd --uri="$uri" "$@" \
        >/dev/null || fail "fio $* failed (output in $out)"
}

# bench_rss PID: resident bytes of a process (VmRSS).
bench_rss ()
{
    awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"
}
