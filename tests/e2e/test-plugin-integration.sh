#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the plugin under nbdkit, driven by a libnbd client:
# write, trim, overwrite, flush; the data read back is exactly what was
# written, and the statistics show the cancelled bytes.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'

mktempdir
dir=$TESTDIR
truncate -s 64M "$dir/disk"
start_nbdkit -P "$dir/pid" -U "$dir/sock" "$PLUGIN" backend="$dir/disk" \
    delay=1h statsfile="$dir/stats.json"

/usr/bin/python3 - "$dir/sock" <<'PY'
import sys, nbd
h = nbd.NBD()
h.connect_unix(sys.argv[1])
assert h.get_size() == 64 << 20
assert h.can_trim() and h.can_zero() and h.can_flush()
a = b"\xaa" * 65536
h.pwrite(a, 0)
h.trim(65536, 0)                      # pending, not yet sent
h.pwrite(b"\xbb" * 4096, 16384)       # cancels 4 KiB of it
h.trim(4096, 1 << 20)
h.zero(4096, 1 << 20)                 # cancels that one
h.flush()
got = h.pread(65536, 0)
# Pending trims read as zeros at once; the write in the middle stays.
assert got[:16384] == bytes(16384), "pending trim does not read as zeros"
assert got[16384:20480] == b"\xbb" * 4096, "write lost"
assert got[20480:] == bytes(45056), "pending trim does not read as zeros"
assert h.pread(4096, 1 << 20) == bytes(4096), "zero did not read back as zeros"
h.shutdown()
PY

stop_pidfile "$dir/pid" nbdkit
wait_for_file "$dir/stats.json" || fail "no statistics written"
cat "$dir/stats.json"
[ "$(json_get "$dir/stats.json" trims)" -eq 2 ] || fail "trims != 2"
[ "$(json_get "$dir/stats.json" cancelled_by_writes)" -eq 4096 ] || fail "cancelled_by_writes != 4096"
[ "$(json_get "$dir/stats.json" cancelled_by_zeroes)" -eq 4096 ] || fail "cancelled_by_zeroes != 4096"
# At stop the rest is forwarded: two pieces either side of the write.
[ "$(json_get "$dir/stats.json" forwarded_bytes)" -eq 61440 ] || fail "forwarded_bytes != 61440"
[ "$(json_get "$dir/stats.json" pending_extents)" -eq 0 ] || fail "pending after stop"
# The backing file: the written pattern, a hole where the trim went.
/usr/bin/python3 - "$dir/disk" <<'PY'
import sys
d = open(sys.argv[1], "rb").read(65536)
assert d[:16384] == bytes(16384), "forwarded discard did not punch"
assert d[16384:20480] == b"\xbb" * 4096, "write lost in the backing file"
assert d[20480:] == bytes(45056), "forwarded discard did not punch"
PY
echo "integration: ok"
