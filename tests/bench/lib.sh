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
#   dc-thin    nbdkit discardcache thin=on (64k slots, the device's size,
#              a fresh meta file each start)
#   file       nbdkit file FILE (data-path rows: the device is a file)
#
# HOOK(discardfuse): a contender "fuse", for the filesystem rows, is the
# discardfuse mount in front of the device instead of nbdkit + nbdfuse;
# in fs_run (tests/bench/run), in place of bench_contender + e2e_attach:
#     mkdir -p "$BENCH_DIR/stack/fuse" "$BENCH_DIR/stack/fs"
#     E2E_DIR=$BENCH_DIR/stack
#     start_discardfuse "$BENCH_DIR/stack/fuse" backend="$(bench_uri dev)" \
#         statsfile="$BENCH_DIR/front.stats.json"
#     E2E_MKFS_OPTS=-K e2e_mkfs_mount "$BENCH_DIR/stack" discard
# and, in place of e2e_detach + bench_final_flush, the unmount is the
# final flush:
#     umount_if_mounted "$E2E_FS"; detach_loop "$E2E_DEV"
#     t0=$(bench_now)
#     stop_discardfuse "$BENCH_DIR/stack/fuse" "$DISCARDFUSE_PID"
#     BENCH_FLUSH_SECS=$(bench_elapsed "$t0")
# then add "fuse" to fs_run's list of kinds and a name in bench.py's
# CONTENDER_NAMES (its statistics are read like dc's: kinds "dc*").

# bench_contender NAME KIND BACKEND [KEYS...]: start contender KIND in
# front of BACKEND (an NBD URI, or a file for "file"), as server NAME.
# discardcache writes its statistics to DIR/NAME.stats.json.
bench_contender ()
{
    local name=$1 kind=$2 backend=$3
    shift 3
    rm -f "$BENCH_DIR/$name.stats.json"
    case $kind in
    nodiscard|nbd)
        bench_start "$name" nbd uri="$backend" "$@" ;;
    file)
        bench_start "$name" file "$backend" "$@" ;;
    dc|dc-nodiscard)
        bench_start "$name" "$PLUGIN" backend="$backend" \
            statsfile="$BENCH_DIR/$name.stats.json" "$@" ;;
    dc-pt)
        bench_start "$name" "$PLUGIN" backend="$backend" \
            passthrough=true statsfile="$BENCH_DIR/$name.stats.json" "$@" ;;
    dc-thin)
        rm -f "$BENCH_DIR/$name.meta"
        bench_start "$name" "$PLUGIN" backend="$backend" thin=on \
            meta="$BENCH_DIR/$name.meta" statsfile="$BENCH_DIR/$name.stats.json" "$@" ;;
    *)
        fail "bench_contender: unknown contender $kind" ;;
    esac
}

# bench_final_flush NAME: everything the contender still holds reaches the
# device; the seconds it took go to BENCH_FLUSH_SECS.  For now by
# stopping nbdkit (engine_stop forwards everything pending).
#
# HOOK(discardctl): to time the flush alone (without nbdkit's own exit,
# about 0.3-0.5 s here) and read what was pending at the end of the run,
# start dc contenders with ctl=$BENCH_DIR/NAME.ctl (bench_contender) and
# do this before bench_stop:
#     "$DISCARDCTL" -s "$BENCH_DIR/$1.ctl" stats --json >"$BENCH_DIR/$1.before.json"
#     t0=$(bench_now)
#     "$DISCARDCTL" -s "$BENCH_DIR/$1.ctl" flush --wait
#     BENCH_FLUSH_SECS=$(bench_elapsed "$t0")
# (DISCARDCTL=$abs_top_builddir/tools/discardctl); record would then read
# pending_bytes from NAME.before.json instead of inferring it from the
# device log.
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
