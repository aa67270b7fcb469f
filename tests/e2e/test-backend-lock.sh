#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: a regular-file backend is locked for the server's
# lifetime (an OFD lock, kept across nbdkit's fork into the background
# and discardfuse's daemonising).  A second server on the same file,
# nbdkit or discardfuse, writable or read-only, is refused at start with
# a message naming the holder's pid and locking=off; read-only servers
# share the file; the lock is gone once the holder stops (also after
# kill -9); locking=off takes no lock and is not refused.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires_root
requires_fuse

"$NBDKIT" "$PLUGIN" --dump-plugin | grep -qx discardcache_locking=ofd ||
    fail "--dump-plugin does not say discardcache_locking=ofd"

mktempdir
dir=$TESTDIR
truncate -s 64M "$dir/disk"
mkdir "$dir/mnt"
n=0

# start_bg ARGS...: nbdkit in the background (it forks after get_ready),
# pid in $dir/pid.$n, stopped at exit; sets BG_PID.
start_bg ()
{
    n=$((n + 1))
    "$NBDKIT" -U "$dir/nbd.$n.sock" -P "$dir/pid.$n" "$PLUGIN" \
        backend="$dir/disk" ctl=none "$@" || fail "nbdkit $* did not start"
    cleanup_fn stop_pidfile "$dir/pid.$n" nbdkit
    wait_pidfile "$dir/pid.$n"
    BG_PID=$(cat "$dir/pid.$n")
}

# refused_nbdkit HOLDER ARGS...: a second nbdkit is refused, naming pid
# HOLDER and locking=off, and leaves nothing running.
refused_nbdkit ()
{
    local holder=$1 status=0
    shift
    n=$((n + 1))
    timeout 60 "$NBDKIT" -U "$dir/nbd.$n.sock" -P "$dir/pid.$n" "$PLUGIN" \
        backend="$dir/disk" ctl=none "$@" 2>"$dir/err" || status=$?
    [ "$status" -ne 0 ] || { stop_pidfile "$dir/pid.$n" nbdkit; fail "nbdkit $* started on a locked file"; }
    [ ! -e "$dir/pid.$n" ] || fail "the refused nbdkit $* wrote a pidfile"
    grep -q "backend=$dir/disk: in use: locked by pid $holder (" "$dir/err" ||
        { cat "$dir/err"; fail "nbdkit $*: the message does not name pid $holder"; }
    grep -q "locking=off" "$dir/err" || { cat "$dir/err"; fail "the message does not name locking=off"; }
    echo "refused: nbdkit $*: $(cat "$dir/err")"
}

refused_fuse ()
{
    local holder=$1 status=0
    shift
    timeout 60 "$DISCARDFUSE" backend="$dir/disk" ctl=none "$@" "$dir/mnt" 2>"$dir/err" || status=$?
    [ "$status" -ne 0 ] || { fusermount3 -u "$dir/mnt"; fail "discardfuse $* mounted a locked file"; }
    grep -qF " $dir/mnt " /proc/mounts && fail "discardfuse $* left a mount"
    grep -q "backend=$dir/disk: in use: locked by pid $holder (" "$dir/err" ||
        { cat "$dir/err"; fail "discardfuse $*: the message does not name pid $holder"; }
    echo "refused: discardfuse $*: $(cat "$dir/err")"
}

# A writer in the background holds it exclusively, after the fork.
start_bg
writer=$BG_PID
grep -q "OFDLCK ADVISORY  WRITE" "/proc/$writer/fdinfo/"* 2>/dev/null ||
    fail "the server (pid $writer) holds no OFD write lock after the fork"
refused_nbdkit "$writer"
refused_nbdkit "$writer" readonly=true
refused_fuse "$writer"
refused_fuse "$writer" readonly=true
# locking=off: no lock taken, so not refused (at the user's risk).
start_bg locking=off
stop_pidfile "$dir/pid.$n" nbdkit
kill -0 "$writer" || fail "the holder died"
stop_pidfile "$dir/pid.1" nbdkit

# Gone with the holder: the next server starts.  Read-only servers share
# the file; a writer is refused while they hold it, naming one of them.
start_bg readonly=true
reader1=$BG_PID
start_bg readonly=true
reader2=$BG_PID
status=0
timeout 60 "$NBDKIT" -U "$dir/nbd.w.sock" -P "$dir/pid.w" "$PLUGIN" \
    backend="$dir/disk" ctl=none 2>"$dir/err" || status=$?
[ "$status" -ne 0 ] || { stop_pidfile "$dir/pid.w" nbdkit; fail "a writer started beside readers"; }
grep -qE "locked by pids ($reader1|$reader2) \(" "$dir/err" ||
    { cat "$dir/err"; fail "the writer's message names neither reader"; }
echo "refused: a writer beside two readers: $(cat "$dir/err")"
stop_pidfile "$dir/pid.$((n - 1))" nbdkit
stop_pidfile "$dir/pid.$n" nbdkit

# discardfuse in the background holds it too (after daemonising); the
# lock goes with the daemon.
"$DISCARDFUSE" backend="$dir/disk" ctl=none "$dir/mnt" || fail "discardfuse did not start"
cleanup_fn stop_discardfuse "$dir/mnt" ""
refused_nbdkit '[0-9]*'
daemon=$(sed -n 's/.*locked by pid \([0-9]*\) .*/\1/p' "$dir/err")
[ "$(cat "/proc/$daemon/comm" 2>/dev/null)" = discardfuse ] ||
    fail "the holder named ($daemon) is not the discardfuse daemon"
fusermount3 -u "$dir/mnt" || fail "fusermount3 -u"
for (( i = 0; i < 600 && $(kill -0 "$daemon" 2>/dev/null && echo 1 || echo 0); i++ )); do
    sleep 0.1
done
kill -0 "$daemon" 2>/dev/null && fail "discardfuse still running after the unmount"

# kill -9 leaves no lock behind.
start_bg
kill -KILL "$BG_PID"
_stopped_pids[$BG_PID]=1           # no TERM at exit to a reused pid
for (( i = 0; i < 600; i++ )); do kill -0 "$BG_PID" 2>/dev/null || break; sleep 0.1; done
start_bg
stop_pidfile "$dir/pid.$n" nbdkit
echo "backend lock: ok"
