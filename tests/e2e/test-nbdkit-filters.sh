#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the plugin under nbdkit's own filters, stacked as an
# administrator would put them in front of it (issue 42, item 4):
# log (outermost: it sees what the client sent), blocksize-policy (the
# block sizes the plugin advertises, enforced), delay (slow writes) and
# error (trims failing while a file exists).  The client sees the sizes
# the plugin gives, requests the policy refuses never reach the plugin,
# trims the error filter fails are not counted as pending, the data
# reads back exactly, and the log records each trim and its reply.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'
for f in log blocksize-policy delay error; do
    requires "$NBDKIT" --filter="$f" null --run true
done

fast_scratch_setup
dir=$TESTDIR
truncate -s 64M "$FASTDIR/disk"
start_nbdkit -P "$dir/pid" -U "$dir/sock" \
    --filter=log --filter=blocksize-policy --filter=delay --filter=error \
    "$PLUGIN" backend="$FASTDIR/disk" delay=1h statsfile="$dir/stats.json" \
    logfile="$dir/log" blocksize-error-policy=error blocksize-minimum=4096 \
    delay-write=5ms error-trim=EIO error-trim-rate=100% \
    error-trim-file="$dir/trims-fail"

/usr/bin/python3 - "$dir/sock" "$dir/trims-fail" <<'PY' || fail "client: above"
import errno, sys, nbd
sock, fail_file = sys.argv[1:]
h = nbd.NBD()
h.connect_unix(sock)
mn = h.get_block_size(nbd.SIZE_MINIMUM)
pref = h.get_block_size(nbd.SIZE_PREFERRED)
mx = h.get_block_size(nbd.SIZE_MAXIMUM)
print("block sizes", mn, pref, mx)
assert mn == 4096, "blocksize-minimum not advertised"
assert pref >= 4096 and pref & (pref - 1) == 0, "the plugin's preferred size lost"
assert mx >= pref
# Send it anyway (libnbd would refuse it itself): the server's policy must.
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
try:
    h.pwrite(b"\x11" * 512, 512)
    raise AssertionError("a write below the minimum reached the plugin")
except nbd.Error as e:
    assert e.errnum == errno.EINVAL, e
h.pwrite(b"\xaa" * 65536, 0)
h.trim(65536, 0)                        # pending in the plugin
h.pwrite(b"\xbb" * 4096, 8192)          # cancels 4 KiB of it
open(fail_file, "w").close()
try:
    h.trim(65536, 1 << 20)
    raise AssertionError("the error filter let a trim through")
except nbd.Error as e:
    assert e.errnum == errno.EIO, e
import os
os.unlink(fail_file)
h.trim(65536, 2 << 20)
h.flush()
got = h.pread(65536, 0)
assert got[8192:12288] == b"\xbb" * 4096, "write lost under the filters"
h.shutdown()
PY

stop_pidfile "$dir/pid" nbdkit
wait_for_file "$dir/stats.json" || fail "no statistics written"
[ "$(json_get "$dir/stats.json" trims)" -eq 2 ] ||
    fail "trims != 2: the failed one reached the plugin, or one was lost"
[ "$(json_get "$dir/stats.json" cancelled_by_writes)" -eq 4096 ] ||
    fail "cancelled_by_writes != 4096"
[ "$(json_get "$dir/stats.json" pending_extents)" -eq 0 ] || fail "pending after stop"
ok=$(grep -c 'Trim .*return=0' "$dir/log" || true)
eio=$(grep -c 'Trim .*return=-1' "$dir/log" || true)
[ "$ok" -eq 2 ] && [ "$eio" -eq 1 ] ||
    { cat "$dir/log"; fail "log: $ok trims answered, $eio failed (want 2, 1)"; }
echo "nbdkit filters: ok (log, blocksize-policy, delay, error)"
