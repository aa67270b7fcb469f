#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: thin mode's reuse reserve on a sparse file (invariant 12).
# 48 MiB written, then half of it trimmed in 1 MiB pieces (24 runs), then
# the rest.  With reserve=8M the file's allocated bytes after a flush stay
# within the live data + the reserve (the largest runs were discarded
# past it), and the reserve is still there after a clean stop (a stop
# does not discard it) and after kill -9; discardctl flush --reserve
# discards it.  With reserve=0 every freed run is discarded as before.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'
mktempdir
dir=$TESTDIR
MiB=$((1024 * 1024))
# A hole punched in a file of the scratch file system may leave a block
# or two at a run's edges: what the bound allows beyond the data.
slack=$((256 * 1024))

# client SOCKET ACTION: write | trim-even | trim-odd (1 MiB pieces of the
# first 48 MiB), each followed by a FLUSH.
client ()
{
    /usr/bin/python3 - "$@" <<'EOF' || fail "client $2"
import os, sys
import nbd
sock, action = sys.argv[1], sys.argv[2]
h = nbd.NBD()
h.connect_unix(sock)
M = 1024 * 1024
for i in range(48):
    if action == "write":
        h.pwrite(os.urandom(M), i * M)
    elif action == "trim-even" and i % 2 == 0 or action == "trim-odd" and i % 2 == 1:
        h.trim(M, i * M)
h.flush()
h.shutdown()
EOF
}

allocated () { echo $(( $(stat -c '%b * %B' "$dir/disk.img") )); }

# start NAME RESERVE: the server on disk.img with meta NAME.meta.
start ()
{
    start_nbdkit -P "$dir/$1.pid" -U "$dir/$1.sock" "$PLUGIN" \
        backend="$dir/disk.img" thin=on slot=64k size=64M reserve="$2" \
        meta="$dir/$3.meta" delay=1h idle=0 ctl="$dir/$1.ctl"
    wait_for_ctl "$dir/$1.ctl"
}

stat_of () { "$DISCARDCTL" -s "$dir/$1.ctl" stats --json > "$dir/$1.json" &&
                 json_get "$dir/$1.json" "$2"; }

# within NAME LIVE: allocated bytes <= LIVE + the reserve + slack.
within ()
{
    local a reserve
    a=$(allocated) reserve=$(stat_of "$1" thin_reserve_bytes)
    echo "$1: allocated $((a / MiB)) MiB, live $(($2 / MiB)) MiB, reserve $((reserve / MiB)) MiB"
    [ "$a" -le $(( $2 + reserve + slack )) ] ||
        fail "$1: $a bytes allocated, more than $2 live + $reserve reserve"
}

truncate -s 64M "$dir/disk.img"
start a 8M r
client "$dir/a.sock" write
client "$dir/a.sock" trim-even
"$DISCARDCTL" -s "$dir/a.ctl" flush --wait >/dev/null || fail "flush"
[ "$(stat_of a thin_reserve_bytes)" -eq $((8 * MiB)) ] ||
    fail "the reserve holds $(stat_of a thin_reserve_bytes) bytes, not 8 MiB"
[ "$(stat_of a thin_reserve_released)" -eq 16 ] ||
    fail "$(stat_of a thin_reserve_released) runs released past the reserve, not 16"
within a $((24 * MiB))
client "$dir/a.sock" trim-odd
"$DISCARDCTL" -s "$dir/a.ctl" flush --wait >/dev/null || fail "flush"
within a 0
kept=$(allocated)
[ "$kept" -ge $(( 8 * MiB - slack )) ] ||
    fail "only $kept bytes allocated: the reserve was discarded"

# A clean stop keeps the reserve, on the device and in meta=.
stop_pidfile "$dir/a.pid" nbdkit
[ "$(allocated)" -eq "$kept" ] || fail "the stop discarded some of the reserve"
start b 8M r
[ "$(stat_of b thin_reserve_bytes)" -eq $((8 * MiB)) ] ||
    fail "after a restart the reserve holds $(stat_of b thin_reserve_bytes) bytes"
# ... and so does kill -9.
kill -KILL "$NBDKIT_PID"
wait "$NBDKIT_PID" 2>/dev/null
stop_pid "$NBDKIT_PID" nbdkit
start c 8M r
[ "$(stat_of c thin_reserve_bytes)" -eq $((8 * MiB)) ] ||
    fail "after kill -9 the reserve holds $(stat_of c thin_reserve_bytes) bytes"
within c 0
# flush --reserve discards it.
"$DISCARDCTL" -s "$dir/c.ctl" flush --reserve --wait >/dev/null ||
    fail "flush --reserve"
[ "$(stat_of c thin_reserve_bytes)" -eq 0 ] || fail "flush --reserve left a reserve"
[ "$(allocated)" -le "$slack" ] ||
    fail "$(allocated) bytes allocated after flush --reserve"
stop_pidfile "$dir/c.pid" nbdkit

# reserve=0: every freed run goes to the device as before.
rm -f "$dir/disk.img"
truncate -s 64M "$dir/disk.img"
start d 0 z
client "$dir/d.sock" write
client "$dir/d.sock" trim-even
"$DISCARDCTL" -s "$dir/d.ctl" flush --wait >/dev/null || fail "flush"
[ "$(stat_of d thin_reserve_bytes)" -eq 0 ] || fail "reserve=0 kept a reserve"
[ "$(stat_of d thin_reserve_released)" -eq 0 ] || fail "reserve=0 released runs"
within d $((24 * MiB))
stop_pidfile "$dir/d.pid" nbdkit
echo "thin reserve: ok"
