# SPDX-License-Identifier: BSD-3-Clause
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
DISCARDFUSE="$abs_top_builddir/fuse/discardfuse"
DISCARDUBLK="$abs_top_builddir/ublk/discardublk"    # built with liburing only
DISCARDCTL="$abs_top_builddir/tools/discardctl"

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

# fast_scratch_setup: the scratch directory TESTDIR (mktempdir), and
# FASTDIR for backing files: a directory on tmpfs when there is one
# (fdatasync on a real disk would make flushes dominate the run time),
# else TESTDIR.  Both are removed at exit.  (Not FASTDIR=$(...): a
# subshell could not register the cleanup.)
fast_scratch_setup ()
{
    mktempdir
    FASTDIR=$TESTDIR
    if [ -d /dev/shm ] && [ -w /dev/shm ] &&
       FASTDIR=$(mktemp -d /dev/shm/discardcache-verify.XXXXXX 2>/dev/null); then
        cleanup_fn rm -rf "$FASTDIR"
    else
        FASTDIR=$TESTDIR
    fi
}

# await_exit PID NAME AFTER: wait for PID to exit and return its status.
# If it is still running 60 s later (a flusher that never stops is a
# bug), fail the test ("... 60 s after AFTER") and KILL it.  Only by pid.
await_exit ()
{
    local pid=$1 name=$2 after=$3 i
    for (( i = 0; i < 600; i++ )); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "$0: FAIL: $name (pid $pid) still running 60 s after $after" >&2
        kill -KILL "$pid" 2>/dev/null
        _cleanup_status=1
    fi
    wait "$pid" 2>/dev/null
}

# Pids stop_pid has already stopped and reaped.  A cleanup hook that runs
# later must not signal them again: the kernel may since have given the
# number to another process (pid_max is 32768 on some of these machines).
declare -gA _stopped_pids=()

# stop_pid PID NAME: TERM, then await_exit.  Only once for a pid.
stop_pid ()
{
    [ -z "${_stopped_pids[$1]+set}" ] || return 0
    _stopped_pids[$1]=1
    kill -TERM "$1" 2>/dev/null || return 0
    await_exit "$1" "$2" SIGTERM
    return 0
}

# wait_started PID NAME SECONDS TEST...: wait until the command TEST
# succeeds; fail if process PID exits first or SECONDS pass.
wait_started ()
{
    local pid=$1 name=$2 secs=$3 i
    shift 3
    for (( i = 0; i < secs * 10; i++ )); do
        "$@" && return 0
        kill -0 "$pid" 2>/dev/null || fail "$name exited at start"
        sleep 0.1
    done
    fail "$name did not start within $secs s (waited for: $*)"
}

# start_nbdkit -P PIDFILE ARGS...: run nbdkit -f ARGS in the background,
# wait for PIDFILE, and stop it (by that pid) at exit.  Sets NBDKIT_PID.
start_nbdkit ()
{
    spawn_nbdkit "$@"
    cleanup_fn stop_pid "$NBDKIT_PID" nbdkit
    wait_nbdkit "$@"
}

# spawn_nbdkit -P PIDFILE ARGS...: the first half of start_nbdkit, without
# the exit hook, for scripts that start many servers one after another and
# keep their own list (tests/bench/lib.sh); wait_nbdkit ARGS... is the
# second half.
spawn_nbdkit ()
{
    [ -n "$(_pidfile_arg "$@")" ] || fail "start_nbdkit: -P PIDFILE is required"
    "$NBDKIT" -f "$@" &
    NBDKIT_PID=$!
    unset "_stopped_pids[$NBDKIT_PID]"
}

wait_nbdkit ()
{
    wait_started "$NBDKIT_PID" "nbdkit $*" 60 test -s "$(_pidfile_arg "$@")"
}

_pidfile_arg ()
{
    local -a args=("$@")
    local i
    for (( i = 0; i < ${#args[@]} - 1; i++ )); do
        [ "${args[i]}" = -P ] && echo "${args[i+1]}" && return 0
    done
    return 0
}

# start_discardfuse MOUNTPOINT ARGS...: run discardfuse -f ARGS MOUNTPOINT
# in the background, wait until MOUNTPOINT/disk appears, and unmount it
# (then wait for that pid) at exit.  Sets DISCARDFUSE_PID.
start_discardfuse ()
{
    local mnt=$1
    shift
    "$DISCARDFUSE" -f "$@" "$mnt" &
    DISCARDFUSE_PID=$!
    cleanup_fn stop_discardfuse "$mnt" "$DISCARDFUSE_PID"
    wait_started "$DISCARDFUSE_PID" "discardfuse $* $mnt" 30 test -e "$mnt/disk"
}

# stop_discardfuse MOUNTPOINT PID: unmount (SIGTERM if the mount is busy
# or gone), then await_exit; returns discardfuse's exit status.  With PID
# empty (a daemon, not our child) it only unmounts.
stop_discardfuse ()
{
    local mnt=$1 pid=$2 status=0
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        fusermount3 -u "$mnt" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
        await_exit "$pid" discardfuse unmount
        status=$?
    fi
    # A killed daemon leaves a dead mount ("transport endpoint is not
    # connected") behind, and a daemon's mount is ours to remove.
    grep -qF " $mnt fuse" /proc/mounts && fusermount3 -u -z "$mnt" 2>/dev/null
    return $status
}

# is_mounted DIR: mountpoint(1), or else the mount table: mountpoint
# stats DIR, and a file system shut down after its device died (XFS)
# answers EIO, so it says "not mounted".
is_mounted ()
{
    mountpoint -q "$1" 2>/dev/null || grep -qF " $1 " /proc/self/mounts
}

# umount_if_mounted DIR: for cleanup hooks.
umount_if_mounted ()
{
    is_mounted "$1" && umount "$1"
    return 0
}

# attach_loop FILE [DEV]: losetup --direct-io=on -f --show FILE, or on
# DEV (from loop_create); sets LOOP_DEV and detaches it at exit unless
# detach_loop did first.  Each device is detached once only: tests run
# in parallel, and a loop device detached twice may belong to another
# test by the second time.
declare -A _loop_files=()
attach_loop ()
{
    if [ -n "${2:-}" ]; then
        losetup --direct-io=on "$2" "$1" || return 1
        LOOP_DEV=$2
    else
        LOOP_DEV=$(losetup --direct-io=on -f --show "$1") || return 1
    fi
    _loop_files[$LOOP_DEV]=$1
    cleanup_fn detach_loop "$LOOP_DEV"
}

# loop_create: a loop device of the test's own (LOOP_CTL_ADD at a free
# number in 200-999, which losetup -f picks only when every lower one
# is busy), removed at exit.  Attached again and again with attach_loop
# FILE DEV, a file system on it keeps its device number, as a disk usually
# does across a reboot.  (A state file on it is tied to the loop device's
# backing file and its own inode: backend/stable-id.c.)  Sets LOOP_OWN.
loop_create ()
{
    local n
    n=$(/usr/bin/python3 - <<'PY'
import errno, fcntl, os, random
fd = os.open("/dev/loop-control", os.O_RDWR)
for n in random.sample(range(200, 1000), 100):
    try:
        print(fcntl.ioctl(fd, 0x4C80, n))           # LOOP_CTL_ADD
        break
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
PY
       ) && [ -n "$n" ] || return 1
    cleanup_fn loop_remove "$n"
    LOOP_OWN=/dev/loop$n
    wait_for_file "$LOOP_OWN" 10
}

# loop_remove N: LOOP_CTL_REMOVE of /dev/loopN (loop_create's).
loop_remove ()
{
    /usr/bin/python3 -c 'import fcntl, os, sys
fcntl.ioctl(os.open("/dev/loop-control", os.O_RDWR), 0x4C81, int(sys.argv[1]))' "$1"
}

# detach_loop DEV: if attach_loop attached DEV and it is still attached,
# losetup -d it and wait (up to 10 s) until DEV has let its file go:
# detaching is asynchronous (DEV stays bound while a file system on it
# is being shut down), and FUSE cannot unmount while loop holds its
# file.  Asked of DEV itself, not with losetup -j FILE, which must stat
# FILE and cannot on a FUSE mount whose server has died.
detach_loop ()
{
    local dev=$1 file=${_loop_files[$1]:-} i
    [ -n "$file" ] || return 0
    unset "_loop_files[$dev]"
    losetup -d "$dev" 2>/dev/null
    for (( i = 0; i < 100; i++ )); do
        [ -e "/sys/block/${dev#/dev/}/loop/backing_file" ] || return 0
        sleep 0.1
    done
    return 1
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

# wait_pidfile PIDFILE: nbdkit started in the background (no -f) has
# exited in the parent, but its server writes PIDFILE a moment later:
# wait until it holds a pid.
wait_pidfile ()
{
    local i
    for (( i = 0; i < 600; i++ )); do
        [ -s "$1" ] && return 0
        sleep 0.1
    done
    fail "no pid in $1 after 60 s"
}

# json_get FILE KEY: a number or boolean from a flat JSON object.
json_get ()
{
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# ctl_stat SOCKET KEY: one statistic from the running server (booleans
# as true/false).
ctl_stat ()
{
    "$DISCARDCTL" -s "$1" stats --json |
        /usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(str(v).lower() if isinstance(v, bool) else v)' "$2"
}

# wait_for_ctl SOCKET: the plugin creates its control socket in
# after_fork, just after nbdkit writes its pidfile: wait for it.
wait_for_ctl ()
{
    wait_for_file "$1" 30 || fail "no control socket at $1"
}

# fd_count PID: descriptors the process holds now.
fd_count ()
{
    ls "/proc/$1/fd" | wc -l
}
