# SPDX-License-Identifier: BSD-3-Clause
# discardcache benchmarks: servers, the slow-TRIM device model, the
# contenders and the clients, for tests/bench/run.  Source
# tests/functions.sh and tests/e2e/e2e-lib.sh first.
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
    declare -gA _bench_pids=() _bench_mounts=()
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

# bench_stop NAME: SIGTERM (a discardfuse server: unmount), wait for the
# exit (stop_pid fails the run if that takes over 60 s); the seconds it
# took go to BENCH_STOP_SECS.  discardcache forwards whatever is still
# pending as it stops, then writes statsfile=.
bench_stop ()
{
    local name=$1 t0
    BENCH_STOP_SECS=0
    [ -n "${_bench_pids[$name]:-}" ] || return 0
    t0=$(bench_now)
    if [ -n "${_bench_mounts[$name]:-}" ]; then
        # Not fail: this also runs in the exit hook, which must go on to
        # stop the other servers; the run's exit status says it.
        if ! stop_discardfuse "${_bench_mounts[$name]}" "${_bench_pids[$name]}"; then
            echo "$0: discardfuse $name exited with an error" >&2
            _cleanup_status=1
        fi
        unset "_bench_mounts[$name]"
    else
        stop_pid "${_bench_pids[$name]}" "nbdkit $name"
    fi
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

# bench_cpu_s PID: the CPU seconds (user + system) the process has used.
bench_cpu_s ()
{
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' \
        "/proc/$1/stat"
}

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
#   thin       nbdkit discardcache thin=on meta=DIR/NAME.meta (slot=auto)
#              (issue 8); only where bench_thin_probe found it built.  A
#              fresh map each start, unless BENCH_KEEP_META=yes
#   fuse       discardfuse (default keys) instead of nbdkit + nbdfuse: the
#              filesystem rows only; it mounts DIR/stack/fuse itself
#   fuse-nodiscard  the same, XFS mounted without -o discard
#   file       nbdkit file FILE (data-path rows: the device is a file)
#   dc-base    dc's keys in the baseline build's plugin (BASE_PLUGIN,
#              tests/bench/baseline.sh)

# bench_is_dc KIND: true if KIND runs discardcache's engine (statistics,
# and a final flush worth timing).
bench_is_dc () { [[ $1 == dc* || $1 == thin || $1 == fuse* ]]; }

# bench_contender NAME KIND BACKEND [KEYS...]: start contender KIND in
# front of BACKEND (an NBD URI, or a file for "file"), as server NAME.
# discardcache (nbdkit or discardfuse) writes its statistics to
# DIR/NAME.stats.json and listens for discardctl on DIR/NAME.ctl.
bench_contender ()
{
    local name=$1 kind=$2 backend=$3
    shift 3
    local -a dc=("$PLUGIN" backend="$backend" statsfile="$BENCH_DIR/$name.stats.json"
                 ctl="$BENCH_DIR/$name.ctl")
    rm -f "$BENCH_DIR/$name.stats.json" "$BENCH_DIR/$name.ctl" "$BENCH_DIR/$name.before.json"
    case $kind in
    nodiscard|nbd)
        bench_start "$name" nbd uri="$backend" "$@" ;;
    file)
        bench_start "$name" file "$backend" "$@" ;;
    dc|dc-nodiscard)
        bench_start "$name" "${dc[@]}" "$@" ;;
    dc-base)
        bench_start "$name" "$BASE_PLUGIN" "${dc[@]:1}" "$@" ;;
    dc-pt)
        bench_start "$name" "${dc[@]}" passthrough=true "$@" ;;
    thin)
        # A fresh map, unless the caller keeps one (BENCH_KEEP_META=yes).
        [ "${BENCH_KEEP_META:-}" = yes ] || rm -f "$BENCH_DIR/$name.meta"
        bench_start "$name" "${dc[@]}" thin=on meta="$BENCH_DIR/$name.meta" "$@" ;;
    fuse|fuse-nodiscard)
        bench_fuse "$name" "$BENCH_DIR/stack/fuse" backend="$backend" \
            statsfile="$BENCH_DIR/$name.stats.json" ctl="$BENCH_DIR/$name.ctl" "$@" ;;
    *)
        fail "bench_contender: unknown contender $kind" ;;
    esac
    ! bench_is_dc "$kind" || wait_for_ctl "$BENCH_DIR/$name.ctl"
}

# bench_fuse NAME MOUNTPOINT KEYS...: discardfuse -f KEYS MOUNTPOINT, kept
# in the list like the nbdkit servers (start_discardfuse would add an
# exit hook per run, each holding a pid that may be reused by then).
bench_fuse ()
{
    local name=$1 mnt=$2
    shift 2
    mkdir -p "$mnt"
    "$DISCARDFUSE" -f "$@" "$mnt" &
    _bench_names+=("$name")
    _bench_pids[$name]=$!
    _bench_mounts[$name]=$mnt
    wait_started "$!" "discardfuse $*" 30 test -e "$mnt/disk"
}

# bench_final_flush NAME: everything the contender still holds reaches the
# device, then it stops.  Sets BENCH_FLUSH_SECS (the flush alone; empty
# for contenders that hold nothing), BENCH_FLUSH_END (wall clock, when it
# returned), BENCH_STOP_SECS (the stop after it) and BENCH_BEFORE (a file
# with discardcache's statistics when the client was done, or empty).
# discardcache (nbdkit or discardfuse): `discardctl flush --wait` on its
# control socket.  A discardfuse without one (none of the benchmark's):
# its unmount is the final flush, and MOUNTPOINT/stats the statistics
# before it.
bench_final_flush ()
{
    local name=$1 ctl=$BENCH_DIR/$1.ctl t0
    BENCH_FLUSH_SECS='' BENCH_BEFORE=''
    if [ -S "$ctl" ]; then
        BENCH_BEFORE=$BENCH_DIR/$name.before.json
        "$DISCARDCTL" -s "$ctl" stats --json >"$BENCH_BEFORE" ||
            fail "discardctl stats --json ($name) failed"
        t0=$(bench_now)
        # A flush that never ends is a finding, not a reason to hang.
        timeout 300 "$DISCARDCTL" -s "$ctl" flush --wait >"$BENCH_DIR/$name.flush.txt" ||
            fail "discardctl flush --wait ($name) failed: $(cat "$BENCH_DIR/$name.flush.txt")"
        BENCH_FLUSH_SECS=$(bench_elapsed "$t0")
        BENCH_FLUSH_END=$(bench_now)
        bench_stop "$name"
    elif [ -n "${_bench_mounts[$name]:-}" ]; then
        BENCH_BEFORE=$BENCH_DIR/$name.before.json
        cp "${_bench_mounts[$name]}/stats" "$BENCH_BEFORE" ||
            fail "cannot read the statistics of discardfuse $name"
        bench_stop "$name"
        BENCH_FLUSH_SECS=$BENCH_STOP_SECS
        BENCH_FLUSH_END=$(bench_now)
    else
        bench_stop "$name"
        BENCH_FLUSH_END=$(bench_now)
    fi
}

# bench_thin_probe FILE: can the built plugin serve thin=on?  A start
# attempt, not a look at --dump-plugin: it also catches a thin mode that
# is built but does not start.  Sets BENCH_THIN to "yes" or to what the
# thin rows say instead ("not built", or the error).
bench_thin_probe ()
{
    local err=$BENCH_DIR/thin-probe.err
    truncate -s 64M "$1"
    rm -f "$1.meta"
    if timeout 60 "$NBDKIT" -U - --run true "$PLUGIN" backend="$1" ctl=none \
           thin=on meta="$1.meta" >/dev/null 2>"$err"; then
        BENCH_THIN=yes
    elif grep -q "unknown parameter 'thin'" "$err"; then
        BENCH_THIN="not built"
    else
        BENCH_THIN="does not start: $(grep -m1 -i error "$err" || head -n 1 "$err")"
    fi
    rm -f "$1" "$1.meta"
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
