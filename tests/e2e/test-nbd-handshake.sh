#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The keeper's NBD handshake (discardctl attach, keeper/nbd-handshake.c)
# against nbdkit, without the kernel's NBD client: the size, the
# transmission flags and the block sizes NBD_OPT_GO gives, and a socket
# ready for requests; a server that is not NBD, one that refuses the
# export, and no server at all each fail with a message.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
PROBE=$abs_top_builddir/tests/unit/nbd-handshake-probe
[ -x "$PROBE" ] || skip "built without netlink: no $PROBE"

mktempdir
dir=$TESTDIR
truncate -s 64M "$dir/disk.img"

start_nbdkit -P "$dir/dc.pid" -U "$dir/dc.sock" "$PLUGIN" \
    backend="$dir/disk.img" ctl=none
out=$("$PROBE" "$dir/dc.sock") || fail "handshake with discardcache failed"
echo "discardcache: $out"
[[ $out == "size=67108864 "* ]] || fail "wrong size: $out"
flags=$(sed -n 's/.*flags=\(0x[0-9a-f]*\).*/\1/p' <<< "$out")
# HAS_FLAGS, SEND_FLUSH, SEND_TRIM, CAN_MULTI_CONN (a file backend).
for bit in 0 2 5 8; do
    (( flags & (1 << bit) )) || fail "flag bit $bit missing: $out"
done
(( !(flags & 2) )) || fail "read-only?: $out"
[[ $out == *" pref=4096" ]] || fail "preferred block size: $out"

# Another server's block sizes come through as they are.
start_nbdkit -r -P "$dir/bs.pid" -U "$dir/bs.sock" --filter=blocksize-policy \
    memory 1M blocksize-minimum=4096 blocksize-preferred=65536 \
    blocksize-maximum=1M
out=$("$PROBE" "$dir/bs.sock") || fail "handshake with nbdkit memory failed"
echo "memory: $out"
[[ $out == "size=1048576 "*" min=4096 pref=65536" ]] || fail "block sizes: $out"
flags=$(sed -n 's/.*flags=\(0x[0-9a-f]*\).*/\1/p' <<< "$out")
(( flags & 2 )) || fail "nbdkit -r: no READ_ONLY flag: $out"

# Failures: nothing listening, a server that is not NBD, an export refused.
"$PROBE" "$dir/none.sock" 2>"$dir/err" && fail "no server: succeeded"
grep -q "No such file" "$dir/err" || fail "no server: $(cat "$dir/err")"
/usr/bin/python3 - "$dir/junk.sock" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept(); c.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n"); c.close()
PY
junk=$!
cleanup_fn stop_pid "$junk" junk-server
wait_for_file "$dir/junk.sock" 10 || fail "the junk server did not start"
"$PROBE" "$dir/junk.sock" 2>"$dir/err" && fail "junk server: succeeded"
grep -q "not a newstyle NBD server" "$dir/err" || fail "junk server: $(cat "$dir/err")"
start_nbdkit -P "$dir/ex.pid" -U "$dir/ex.sock" --filter=exportname \
    memory 1M exportname-strict=true exportname=other
"$PROBE" "$dir/ex.sock" 2>"$dir/err" && fail "export refused: succeeded"
grep -q "refused the export" "$dir/err" || fail "export refused: $(cat "$dir/err")"
echo "failures reported: ok"
