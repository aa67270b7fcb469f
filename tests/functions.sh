# discardcache: shell helpers for the tests, sourced by each test script.
# Modelled on nbdkit's tests/functions.sh: requires skips with exit 77,
# cleanup hooks run on EXIT/INT/TERM, servers are started with a pidfile
# and killed by pid only.
#
# Under CI (CI=true) a missing prerequisite is a failure, not a skip.

set -u

: "${abs_top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${abs_top_builddir:=$abs_top_srcdir}"
: "${NBDKIT:=nbdkit}"
PLUGIN="$abs_top_builddir/nbd-plugin/.libs/nbdkit-discardcache-plugin.so"

_cleanup_hooks=()
_cleanup_status=0

# cleanup_fn CMD ARGS...: run at exit (also on INT/TERM), last registered
# first.  A hook that sets _cleanup_status=1 fails the test.
cleanup_fn ()
{
    _cleanup_hooks+=("$(printf '%q ' "$@")")
}

_run_cleanup_hooks ()
{
    local status=${1:-$?} i
    set +e
    trap '' INT QUIT TERM EXIT
    for (( i = ${#_cleanup_hooks[@]} - 1; i >= 0; i-- )); do
        eval "${_cleanup_hooks[i]}"
    done
    [ "$status" -eq 0 ] && status=$_cleanup_status
    exit "$status"
}
trap _run_cleanup_hooks EXIT
trap '_run_cleanup_hooks 1' INT QUIT TERM

# skip REASON: exit 77 (skipped), or fail under CI.
skip ()
{
    if [ "${CI:-}" = true ]; then
        echo "$0: FAIL: prerequisite missing under CI: $*" >&2
        exit 1
    fi
    echo "$0: SKIP: $*" >&2
    exit 77
}

# requires CMD ARGS...: skip unless the command runs successfully.
requires ()
{
    "$@" </dev/null >/dev/null 2>&1 || skip "requires: $* failed"
}

requires_root ()
{
    [ "$(id -u)" -eq 0 ] || skip "needs root"
}

requires_fuse ()
{
    [ -c /dev/fuse ] || skip "/dev/fuse is missing (load the fuse module or use a machine with FUSE)"
    requires fusermount3 --version
}

requires_loop ()
{
    requires_root
    losetup -f >/dev/null 2>&1 || skip "no free loop device (losetup -f failed)"
}

fail ()
{
    echo "$0: FAIL: $*" >&2
    exit 1
}

# mktempdir: make a scratch directory, removed at exit, in $TESTDIR.
# (Not dir=$(mktempdir): a subshell could not register the cleanup.)
mktempdir ()
{
    TESTDIR=$(mktemp -d "${TMPDIR:-/tmp}/discardcache-test.XXXXXX")
    cleanup_fn rm -rf "$TESTDIR"
}

# Pids stop_pid has already stopped and reaped.  A cleanup hook that runs
# later must not signal them again: the kernel may since have given the
# number to another process (pid_max is 32768 on some of these machines).
declare -gA _stopped_pids=()

# stop_pid PID NAME: TERM, then fail the test if it has not exited within
# 60 s (a flusher that never stops is a bug), then KILL.  Only by pid, and
# only once.
stop_pid ()
{
    local pid=$1 name=$2 i
    [ -z "${_stopped_pids[$pid]+set}" ] || return 0
    _stopped_pids[$pid]=1
    kill -TERM "$pid" 2>/dev/null || return 0
    for (( i = 0; i < 600; i++ )); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "$0: FAIL: $name (pid $pid) still running 60 s after SIGTERM" >&2
        kill -KILL "$pid" 2>/dev/null
        _cleanup_status=1
    fi
    wait "$pid" 2>/dev/null
    return 0
}

# start_nbdkit -P PIDFILE ARGS...: run nbdkit -f ARGS in the background,
# wait for PIDFILE, and stop it (by that pid) at exit.  Sets NBDKIT_PID.
start_nbdkit ()
{
    spawn_nbdkit "$@"
    cleanup_fn stop_pid "$NBDKIT_PID" nbdkit
}

# spawn_nbdkit -P PIDFILE ARGS...: start_nbdkit without the exit hook, for
# callers that start many servers one after another and keep their own
# list of what is still running (tests/bench/lib.sh).  On failure the
# process is stopped before the test fails.
spawn_nbdkit ()
{
    local pidfile= i
    local -a args=("$@")
    for (( i = 0; i < ${#args[@]} - 1; i++ )); do
        [ "${args[i]}" = -P ] && pidfile=${args[i+1]}
    done
    [ -n "$pidfile" ] || fail "start_nbdkit: -P PIDFILE is required"
    "$NBDKIT" -f "$@" &
    NBDKIT_PID=$!
    unset "_stopped_pids[$NBDKIT_PID]"
    for (( i = 0; i < 600; i++ )); do
        [ -s "$pidfile" ] && return 0
        kill -0 "$NBDKIT_PID" 2>/dev/null || fail "nbdkit $* exited at start"
        sleep 0.1
    done
    stop_pid "$NBDKIT_PID" nbdkit
    fail "nbdkit $* did not write $pidfile within 60 s"
}

# stop_pidfile PIDFILE NAME: stop the process whose pid PIDFILE holds.
stop_pidfile ()
{
    [ -s "$1" ] || return 0
    stop_pid "$(cat "$1")" "$2"
}

# wait_for_file FILE [SECONDS]: wait until FILE exists.
wait_for_file ()
{
    local f=$1 secs=${2:-30} i
    for (( i = 0; i < secs * 10; i++ )); do
        [ -e "$f" ] && return 0
        sleep 0.1
    done
    return 1
}

# json_get FILE KEY: a number or boolean from a flat JSON object.
json_get ()
{
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}
