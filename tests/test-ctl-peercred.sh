#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: invariant 6, who may use the control socket.  A user who
# is neither root nor the server's user is refused twice over: by the
# socket's mode 0600 (connect fails, discardctl says permission denied),
# and, with the socket opened to everyone (chmod 0666, as only a test
# would), by the server's SO_PEERCRED check, which refuses, logs and
# disconnects.  Root is served.
source "${abs_top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
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
echo "ctl peer credentials: ok"
