#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: invariant 6, who may use the control socket.  A user who
# is neither root nor the server's user is refused twice over: by the
# socket's mode 0600 (connect fails, discardctl says permission denied),
# and, with the socket opened to everyone (chmod 0666, as only a test
# would), by the server's SO_PEERCRED check, which refuses, logs and
# disconnects.  Root is served.  Under nbdkit -u, the socket is made
# again as the server's user, who can then use it.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires_root
requires setpriv --version
id nobody >/dev/null 2>&1 || skip "no user nobody"

mktempdir
dir=$TESTDIR
# nobody must reach the socket by path, and run the program.
chmod 0755 "$dir"
cp "$DISCARDCTL" "$dir/discardctl"
truncate -s 16M "$dir/disk"
start_nbdkit -P "$dir/pid" -U "$dir/nbd.sock" "$PLUGIN" backend="$dir/disk" \
    ctl="$dir/ctl.sock" 2>"$dir/log"
wait_for_ctl "$dir/ctl.sock"
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

"$dir/discardctl" -s "$dir/ctl.sock" stats >/dev/null || fail "root was refused"

# The socket's mode.
"${as_nobody[@]}" "$dir/discardctl" -s "$dir/ctl.sock" stats >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ "$rc" -eq 3 ] || fail "nobody against the 0600 socket: exit $rc, expected 3"
grep -q "permission denied" "$dir/out" || fail "the message does not say permission denied"

# The server's own check.
chmod 0666 "$dir/ctl.sock"
"${as_nobody[@]}" "$dir/discardctl" -s "$dir/ctl.sock" stats >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ "$rc" -eq 3 ] || fail "nobody against the 0666 socket: exit $rc, expected 3"
grep -q "refused by the server: permission denied: uid 65534" "$dir/out" ||
    fail "the server's refusal was not shown"
grep -q "refused pid [0-9]* uid 65534" "$dir/log" || { cat "$dir/log"; fail "the refusal was not logged"; }

# Still serving root afterwards.
"$dir/discardctl" -s "$dir/ctl.sock" stats --json >/dev/null || fail "root refused after the refusals"

# nbdkit -u/-g: the server becomes nobody after the socket was made (as
# root, before the fork); where nobody may write, it makes the socket
# again as nobody, so that its own user can use it.
own=$dir/own
mkdir "$own"
chown nobody:nogroup "$own"
truncate -s 16M "$dir/disk2" "$dir/disk3"
start_nbdkit -P "$own/pid" -U "$own/nbd.sock" -u nobody -g nogroup "$PLUGIN" \
    backend="$dir/disk2" ctl="$own/ctl.sock" 2>"$dir/log-u"
for (( i = 0; i < 100; i++ )); do
    [ "$(stat -c %U "$own/ctl.sock" 2>/dev/null)" = nobody ] && break
    sleep 0.1
done
[ "$(stat -c '%U %a' "$own/ctl.sock")" = "nobody 600" ] ||
    { cat "$dir/log-u"; fail "-u nobody: the socket is $(stat -c '%U %a' "$own/ctl.sock"), expected nobody 600"; }
"${as_nobody[@]}" "$dir/discardctl" -s "$own/ctl.sock" stats >"$dir/out" 2>&1 ||
    { cat "$dir/out"; fail "-u nobody: the server's own user was refused"; }
"$dir/discardctl" -s "$own/ctl.sock" stats >/dev/null || fail "-u nobody: root was refused"
setpriv --reuid=daemon --regid=daemon --clear-groups \
    "$dir/discardctl" -s "$own/ctl.sock" stats >"$dir/out" 2>&1
rc=$?
[ "$rc" -eq 3 ] || { cat "$dir/out"; fail "-u nobody: daemon got exit $rc, expected 3"; }

# Where nobody may not write, the socket stays root's, and the log says
# so; root still controls the server.
start_nbdkit -P "$own/pid3" -U "$own/nbd3.sock" -u nobody -g nogroup "$PLUGIN" \
    backend="$dir/disk3" ctl="$dir/ctl3.sock" 2>"$dir/log-u3"
for (( i = 0; i < 100; i++ )); do
    grep -q "only root can use it" "$dir/log-u3" && break
    sleep 0.1
done
grep -q "ctl: $dir/ctl3.sock belongs to uid 0, but the server now runs as uid 65534 .*only root can use it" \
    "$dir/log-u3" || { cat "$dir/log-u3"; fail "-u nobody, root's directory: no message"; }
"$dir/discardctl" -s "$dir/ctl3.sock" stats >/dev/null || fail "-u nobody, root's directory: root was refused"
echo "ctl peer credentials: ok"
