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

# Sanitizer builds (configure --enable-sanitizers=...): nbdkit is not
# instrumented but loads our instrumented plugin and test filters, so an
# nbdkit that loads anything from the build tree runs through a wrapper
# that preloads the sanitizer runtimes (SANITIZER_PRELOAD, found by
# configure) and the exit() shim (tests/sanitizer/exit-shim.c says why).
# Other nbdkit servers (a backend with its shell commands) run plain.
# Reports go to files, not to a stderr that nobody reads after SIGTERM;
# a test that leaves any fails at exit, showing them.  nbdkit's own
# leaks at exit are not ours: leak checking stays with our programs.
_sanitizer_setup ()
{
    local d shim=$abs_top_builddir/tests/sanitizer/.libs/nbdkit-exit-shim.so
    [ -e "$shim" ] || { echo "$0: FAIL: $shim is missing (make check builds it)" >&2; exit 1; }
    d=$(mktemp -d "${TMPDIR:-/tmp}/discardcache-san.XXXXXX") || exit 1
    chmod 1777 "$d"             # tests that run nbdkit as nobody
    cleanup_fn rm -rf "$d"
    cleanup_fn _sanitizer_check "$d"
    cat > "$d/nbdkit" <<EOF
#!/bin/sh
for a in "\$@"; do
    case \$a in
    *"$abs_top_builddir/"*)
        export LD_PRELOAD="$SANITIZER_PRELOAD:$shim"
        export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=$d/report"
        export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$d/report"
        export TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:log_path=$d/report"
        break ;;
    esac
done
exec "$NBDKIT" "\$@"
EOF
    chmod 0755 "$d/nbdkit"
    NBDKIT=$d/nbdkit
}

_sanitizer_check ()
{
    local f found=0
    for f in "$1"/report*; do
        [ -e "$f" ] || continue
        echo "$0: FAIL: sanitizer report from nbdkit ($f):" >&2
        cat "$f" >&2
        found=1
    done
    [ "$found" -eq 0 ] || _cleanup_status=1
}

case ${SANITIZERS:-no} in
    no|'') ;;
    *) [ -n "${SANITIZER_PRELOAD:-}" ] ||
           { echo "$0: FAIL: a sanitizer build without SANITIZER_PRELOAD" >&2; exit 1; }
       _sanitizer_setup ;;
esac

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

# stop_pid PID NAME: TERM, then fail the test if it has not exited within
# 60 s (a flusher that never stops is a bug), then KILL.  Only by pid.
stop_pid ()
{
    local pid=$1 name=$2 i
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
    local pidfile= i
    local -a args=("$@")
    for (( i = 0; i < ${#args[@]} - 1; i++ )); do
        [ "${args[i]}" = -P ] && pidfile=${args[i+1]}
    done
    [ -n "$pidfile" ] || fail "start_nbdkit: -P PIDFILE is required"
    "$NBDKIT" -f "$@" &
    NBDKIT_PID=$!
    cleanup_fn stop_pid "$NBDKIT_PID" nbdkit
    for (( i = 0; i < 600; i++ )); do
        [ -s "$pidfile" ] && return 0
        kill -0 "$NBDKIT_PID" 2>/dev/null || fail "nbdkit $* exited at start"
        sleep 0.1
    done
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
