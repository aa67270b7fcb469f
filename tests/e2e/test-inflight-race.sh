#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: invariant 1 under a real race.  The backend is an NBD
# server whose trims take 200 ms (nbdkit delay filter); discardcache
# forwards at once (delay=0 idle=0, unpaced: budget=off).  A write to the range while its
# discard is in flight must wait for it: without the wait, the server
# runs the write first and the late trim wipes it.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --filter=delay null --dump-plugin

mktempdir
dir=$TESTDIR
start_nbdkit -P "$dir/dev.pid" -U "$dir/dev.sock" --filter=delay memory 64M \
    delay-trim=200ms
start_nbdkit -P "$dir/pid" -U "$dir/sock" "$PLUGIN" \
    backend="nbd+unix:///?socket=$dir/dev.sock" delay=0 idle=0 budget=off \
    statsfile="$dir/stats.json"

/usr/bin/python3 - "$dir/sock" <<'PY'
import sys, time, nbd
h = nbd.NBD()
h.connect_unix(sys.argv[1])
iterations = 24
for i in range(iterations):
    base = (i % 32) * (1 << 20)
    old = bytes([i + 1]) * 65536
    new = bytes([0x80 | i]) * 4096
    h.pwrite(old, base)
    h.trim(65536, base)
    # Land the write while the discard is in flight (0-150 ms into 200).
    time.sleep((i % 4) * 0.05)
    h.pwrite(new, base + 8192)
    # Read only once any discard in flight has surely landed.
    time.sleep(0.3)
    got = h.pread(4096, base + 8192)
    assert got == new, "iteration %d: write lost to an in-flight discard" % i
print("race: %d iterations, no write lost" % iterations)
h.shutdown()
PY
stop_pidfile "$dir/pid" nbdkit
cat "$dir/stats.json"
waits=$(json_get "$dir/stats.json" write_waits)
# The test is only meaningful if writes really met discards in flight.
[ "$waits" -ge 10 ] || fail "only $waits writes met a discard in flight"
echo "inflight race: ok ($waits writes waited)"
