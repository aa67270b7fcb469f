#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: fail before serving.  nbdkit and discardfuse started in
# the background (no -f: nbdkit forks after get_ready, discardfuse
# daemonises once mounted), each with ctl=, state= or statsfile= in a
# directory that does not exist: a non-zero exit, one message naming
# the key, and nothing left behind (no process, no pidfile, no socket,
# no mount, the backend not locked).  Then what must survive the fork:
# the default control socket, renamed from the parent's PID.sock to the
# server's, answering with the server's pid; and meta='s lock, held by a
# server in the background against a second one.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires_root
requires_fuse

mktempdir
dir=$TESTDIR
truncate -s 64M "$dir/disk" "$dir/disk2"
mkdir "$dir/mnt" "$dir/xdg"
missing=$dir/missing/dir

# leftovers: fail if anything of a failed start is still there.
leftovers ()
{
    local what=$1 pids
    pids=$(pgrep -f -- "$dir/" || true)
    if [ -n "$pids" ]; then
        ps -o pid,args -p $pids >&2
        for p in $pids; do kill -KILL "$p" 2>/dev/null; done
        fail "$what: processes left running"
    fi
    grep -qF " $dir/" /proc/mounts && { fusermount3 -u -z "$dir/mnt"; fail "$what: left a mount"; }
    [ -z "$(find "$dir" -type s)" ] || fail "$what: left a socket: $(find "$dir" -type s)"
    [ ! -e "$dir/pid" ] || fail "$what: wrote a pidfile"
    # The backend is free again: a lock held by a leftover would refuse this.
    timeout 60 "$NBDKIT" -f -U "$dir/probe.sock" --run true "$PLUGIN" \
        backend="$dir/disk" ctl=none 2>"$dir/probe.err" ||
        { cat "$dir/probe.err" >&2; fail "$what: the backend is still locked"; }
    rm -f "$dir/probe.sock"
}

cases=(
  "ctl=$missing/ctl.sock"
  "state=$missing/state"
  "statsfile=$missing/stats.json"
)
for arg in "${cases[@]}"; do
    key=${arg%%=*}
    status=0
    timeout 60 "$NBDKIT" -U "$dir/nbd.sock" -P "$dir/pid" "$PLUGIN" \
        backend="$dir/disk" "$arg" 2>"$dir/err" || status=$?
    [ "$status" -ne 0 ] ||
        { stop_pidfile "$dir/pid" nbdkit; fail "nbdkit $arg: exit 0 in the background"; }
    [ "$status" -ne 124 ] || fail "nbdkit $arg: did not return"
    grep -q "$key=$missing" "$dir/err" || { cat "$dir/err"; fail "nbdkit $arg: no message naming $key="; }
    [ "$(wc -l < "$dir/err")" -eq 1 ] || { cat "$dir/err"; fail "nbdkit $arg: more than one line"; }
    leftovers "nbdkit $arg"
    echo "nbdkit $arg: exit $status: $(cat "$dir/err")"

    status=0
    timeout 60 "$DISCARDFUSE" backend="$dir/disk" "$arg" "$dir/mnt" 2>"$dir/err" || status=$?
    [ "$status" -ne 0 ] || { fusermount3 -u "$dir/mnt"; fail "discardfuse $arg: exit 0 in the background"; }
    grep -q "$key=$missing" "$dir/err" || { cat "$dir/err"; fail "discardfuse $arg: no message naming $key="; }
    [ "$(wc -l < "$dir/err")" -eq 1 ] || { cat "$dir/err"; fail "discardfuse $arg: more than one line"; }
    leftovers "discardfuse $arg"
    echo "discardfuse $arg: exit $status: $(cat "$dir/err")"
done

# The default control socket, through nbdkit's fork: bound by the parent
# as PARENT.sock before it forks, renamed by the server to its own pid.
XDG_RUNTIME_DIR=$dir/xdg "$NBDKIT" -U "$dir/nbd.sock" -P "$dir/pid" "$PLUGIN" \
    backend="$dir/disk" || fail "nbdkit with the default socket did not start"
cleanup_fn stop_pidfile "$dir/pid" nbdkit
wait_pidfile "$dir/pid"
pid=$(cat "$dir/pid")
# The rename is in after_fork, just after nbdkit writes its pidfile.
wait_for_file "$dir/xdg/discardcache/$pid.sock" 30 ||
    fail "no socket $pid.sock (the server's pid) in $dir/xdg/discardcache"
socks=$(cd "$dir/xdg/discardcache" && echo *.sock)
[ "$socks" = "$pid.sock" ] || fail "default sockets: '$socks', expected $pid.sock (the server's pid)"
"$DISCARDCTL" -s "$dir/xdg/discardcache/$pid.sock" stats --json >/dev/null ||
    fail "the renamed default socket does not answer"
/usr/bin/python3 - "$dir/xdg/discardcache/$pid.sock" "$pid" <<'PY' || fail "greeting"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])
hello = json.loads(s.makefile("rb").readline())
assert hello["pid"] == int(sys.argv[2]), hello
PY
stop_pidfile "$dir/pid" nbdkit
[ ! -e "$dir/xdg/discardcache/$pid.sock" ] || fail "the default socket was not removed at stop"
rm -f "$dir/nbd.sock" "$dir/pid"
echo "default socket: bound before the fork, served as $pid.sock, removed at stop"

# meta= is locked (flock) by a server in the background, across the fork:
# a second server with the same meta= (another backend) is refused.
"$NBDKIT" -U "$dir/nbd.sock" -P "$dir/pid" "$PLUGIN" backend="$dir/disk" \
    thin=on meta="$dir/meta" ctl=none || fail "thin server did not start"
cleanup_fn stop_pidfile "$dir/pid" nbdkit
wait_pidfile "$dir/pid"
status=0
timeout 60 "$NBDKIT" -U "$dir/nbd2.sock" -P "$dir/pid2" "$PLUGIN" backend="$dir/disk2" \
    thin=on meta="$dir/meta" ctl=none 2>"$dir/err" || status=$?
[ "$status" -ne 0 ] || { stop_pidfile "$dir/pid2" nbdkit; fail "a second server took a locked meta="; }
grep -q "meta=$dir/meta: in use" "$dir/err" || { cat "$dir/err"; fail "no message naming meta="; }
[ ! -e "$dir/pid2" ] || fail "the refused server wrote a pidfile"
kill -0 "$(cat "$dir/pid")" || fail "the first server died"
status=0
timeout 60 "$DISCARDFUSE" backend="$dir/disk2" thin=on meta="$dir/meta" ctl=none \
    "$dir/mnt" 2>"$dir/err" || status=$?
[ "$status" -ne 0 ] || { fusermount3 -u "$dir/mnt"; fail "discardfuse took a locked meta="; }
grep -q "meta=$dir/meta: in use" "$dir/err" || { cat "$dir/err"; fail "discardfuse: no message naming meta="; }
grep -qF " $dir/mnt " /proc/mounts && fail "discardfuse mounted with a locked meta="
echo "meta=: locked across nbdkit's fork: $(cat "$dir/err")"
