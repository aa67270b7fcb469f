#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the state file (invariant 4) across restarts of nbdkit,
# with journal=off (tests/e2e/test-journal-crash.sh tests the journal)
# on a regular file.  A clean stop saves the pending set instead of
# forwarding it and the next start loads exactly that set and removes
# the file; after kill -9 there is nothing to replay; a corrupt,
# truncated, other-version or mismatched file (another file, another
# size, the file modified since) is refused with its reason, set aside
# as FILE.rejected and nothing of it is discarded, even with delay=0.
# The known-clean map (invariant 9) crosses a clean restart the same
# way, and a version 1 file (before the map) still loads.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'

mktempdir
dir=$TESTDIR
state=$dir/state
disk=$dir/disk

# start_dc NAME KEY=VALUE...: the plugin on $disk with state=$state,
# its log in $dir/NAME.log, its control socket $dir/NAME.ctl.
start_dc ()
{
    local name=$1
    shift
    # A name may be used again: start_nbdkit waits for a new pidfile.
    rm -f "$dir/$name.pid" "$dir/$name.sock"
    start_nbdkit -P "$dir/$name.pid" -U "$dir/$name.sock" "$PLUGIN" \
        backend="$disk" state="$state" ctl="$dir/$name.ctl" journal=off \
        statsfile="$dir/$name.json" "$@" 2>"$dir/$name.log"
    wait_for_ctl "$dir/$name.ctl"
}

stop_dc ()
{
    stop_pidfile "$dir/$1.pid" nbdkit
}

# pending NAME: offset and length of every pending extent, into
# $dir/NAME.pending (a file, so that a failure here fails the test).
pending ()
{
    "$DISCARDCTL" -s "$dir/$1.ctl" dump >"$dir/$1.dump" || fail "discardctl dump failed"
    cut -d' ' -f1,2 "$dir/$1.dump" >"$dir/$1.pending"
}

# fill: a fresh 64 MiB disk of data (no holes) and no state file.
# trims NAME: aligned ranges, unaligned ones with sub-granule heads and
# tails, and a write that splits one of them.
fill ()
{
    rm -f "$disk" "$state" "$state.rejected"
    /usr/bin/python3 -c '
import sys
with open(sys.argv[1], "wb") as f:
    for i in range(64):
        f.write(bytes([i + 1]) * (1 << 20))' "$disk"
}

trims ()
{
    /usr/bin/python3 - "$dir/$1.sock" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
for i in range(40):
    h.trim(64 * 1024 + i * 512, i * (1 << 20) + 1000)
h.pwrite(b"\x77" * 4096, 5 * (1 << 20) + 16384)
h.shutdown()
PY
}

# intact: the trimmed ranges still hold their data: nothing discarded.
intact ()
{
    /usr/bin/python3 - "$disk" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
for i in range(40):
    off = i * (1 << 20) + 1000
    got = d[off:off + 65536]
    want = bytes([i + 1]) * 65536
    if i == 5:
        want = want[:16384 - 1000] + b"\x77" * 4096 + want[16384 - 1000 + 4096:]
    assert got == want, "data at %d was discarded" % off
PY
}

allocated ()
{
    echo $(( $(stat -c %b "$disk") * 512 ))
}

# refused NAME REASON: the start refused the file, set it aside, applied
# nothing (delay=0 would have forwarded it by now).
refused ()
{
    local name=$1 reason=$2
    start_dc "$name" delay=0 idle=0
    grep "refused, nothing applied: " "$dir/$name.log" | grep -qF "$reason" ||
        { cat "$dir/$name.log"; fail "$name: no refusal saying '$reason'"; }
    [ ! -e "$state" ] || fail "$name: the refused file was left in place"
    [ -e "$state.rejected" ] || fail "$name: the refused file was not set aside"
    pending "$name"
    [ ! -s "$dir/$name.pending" ] || fail "$name: extents of a refused file were applied"
    sleep 0.5
    stop_dc "$name"
    [ ! -e "$state" ] || fail "$name: a state file appeared with nothing pending"
    intact || fail "$name: data discarded after a refused state file"
    rm -f "$state.rejected"
}

# rewrite_state PYTHON: run PYTHON on the state file's bytes b (a
# bytearray, struct imported), then store b with its CRC-32C fixed up.
rewrite_state ()
{
    /usr/bin/python3 - "$state" "$1" <<'PY'
import struct, sys
def crc32c(data, crc=0):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
def crc_of(b):
    return crc32c(b[:104] + b"\0\0\0\0" + b[108:])
b = bytearray(open(sys.argv[1], "rb").read())
assert crc_of(b) == struct.unpack_from("<I", b, 104)[0], \
    "the test's CRC-32C disagrees with the file's"
exec(sys.argv[2])
struct.pack_into("<I", b, 104, crc_of(b))
open(sys.argv[1], "wb").write(b)
PY
}

# A fresh state file from a clean stop, nothing forwarded.
make_state ()
{
    fill
    start_dc make
    trims make
    stop_dc make
    [ -s "$state" ] || fail "no state file after a clean stop"
}

# 1. A clean stop saves, the restart restores exactly the same set.
fill
alloc0=$(allocated)
start_dc a
[ ! -e "$state" ] || fail "a state file before any stop"
trims a
pending a
[ "$(wc -l <"$dir/a.pending")" -eq 41 ] || { cat "$dir/a.pending"; fail "expected 41 pending extents"; }
stop_dc a
[ -s "$state" ] || fail "no state file after a clean stop"
[ "$(stat -c %a "$state")" = 600 ] || fail "state file mode is not 0600"
[ "$(json_get "$dir/a.json" forwarded_bytes)" -eq 0 ] || fail "forwarded at stop despite state="
[ "$(allocated)" -eq "$alloc0" ] || fail "holes punched at stop despite state="
echo "state file: $(stat -c %s "$state") bytes for 41 extents"
start_dc b
[ ! -e "$state" ] || fail "the state file was not consumed at start"
pending b
diff "$dir/a.pending" "$dir/b.pending" || fail "the pending set changed across a restart"
"$DISCARDCTL" -s "$dir/b.ctl" dump | awk '$3 > 5000 { exit 1 }' ||
    fail "loaded extents kept their old age"
stop_dc b
[ -s "$state" ] || fail "no state file after the second clean stop"
[ "$(json_get "$dir/b.json" state_loaded_extents)" -eq 41 ] ||
    fail "stats: state_loaded_extents is not 41 after a load"

# 2. Loaded extents are forwarded like any other (delay=0 here).
start_dc c delay=0 idle=0
for (( i = 0; i < 100; i++ )); do
    [ "$("$DISCARDCTL" -s "$dir/c.ctl" stats --json | jq '.pending_bytes == .subgranule_bytes')" = true ] && break
    sleep 0.1
done
[ "$(allocated)" -lt "$alloc0" ] || fail "the loaded extents were never forwarded"
stop_dc c

# 2b. What c forwarded is known clean, and its stop saved that: the same
# trims again after a restart are acknowledged, not sent (the granule
# the write dirtied goes out again).
[ -s "$state" ] || fail "the known-clean map was not saved at the stop of c"
start_dc d delay=0 idle=0
[ ! -e "$state" ] || fail "the state file was not consumed at start"
trims d
"$DISCARDCTL" -s "$dir/d.ctl" flush --wait >/dev/null || fail "flush --wait failed"
stop_dc d
clean=$(json_get "$dir/d.json" state_loaded_clean_extents)
already=$(json_get "$dir/d.json" already_clean_bytes)
sent=$(json_get "$dir/d.json" forwarded_bytes)
echo "after a restart: $clean known-clean extents loaded, $already trimmed bytes already clean, $sent forwarded"
[ "$clean" -ge 40 ] || fail "stats: only $clean known-clean extents loaded"
[ "$already" -ge $(( 40 * 65536 - 65536 )) ] || fail "only $already bytes of the trims were known clean"
[ "$sent" -le 4096 ] || fail "$sent bytes forwarded for trims over known-clean space"
intact 2>/dev/null && fail "the trims of d were not applied"

# 3. kill -9 after the file was consumed: nothing left to replay.
make_state
start_dc k delay=1h
[ ! -e "$state" ] || fail "not consumed"
kill -KILL "$(cat "$dir/k.pid")"
wait "$(cat "$dir/k.pid")" 2>/dev/null
[ ! -e "$state" ] || fail "a state file exists after kill -9"
start_dc k2 delay=0 idle=0
pending k2
[ ! -s "$dir/k2.pending" ] || fail "extents replayed after kill -9"
stop_dc k2
[ "$(json_get "$dir/k2.json" state_loaded_extents)" -eq 0 ] ||
    fail "stats: state_loaded_extents is not 0 after kill -9"
intact || fail "data discarded after kill -9 and restart"

# 4. Refused files.
make_state
/usr/bin/python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[-3] ^= 0x10
open(sys.argv[1], "wb").write(b)' "$state"
refused corrupt "checksum mismatch"

make_state
truncate -s $(( $(stat -c %s "$state") / 2 )) "$state"
refused truncated "truncated or corrupt"

make_state
rewrite_state 'struct.pack_into("<I", b, 8, 3)'
refused version "format version 3, this discardcache reads versions 1 and 2"

make_state
mv "$disk" "$disk.saved"
cp "$disk.saved" "$disk"           # same size and content, another inode
refused other-file "saved for another file"
mv "$disk.saved" "$disk"

make_state
truncate -s 128M "$disk"
refused other-size "saved for a backend of 67108864 bytes, this one has 134217728"
truncate -s 64M "$disk"

make_state
/usr/bin/python3 -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(63 << 20); f.write(b"written while the server was down")' "$disk"
refused modified "the backend file was modified after the state was saved"

# 5. A version 1 file (pending extents only, a 112-byte header: the
# format before the known-clean map) still loads.
make_state
rewrite_state '
assert struct.unpack_from("<II", b, 8) == (2, 136), "not a version 2 file"
assert b[112:136] == bytes(24), "known-clean extents in a file made without any"
del b[112:136]
struct.pack_into("<II", b, 8, 1, 112)'
start_dc v1
[ ! -e "$state" ] || fail "the version 1 file was not consumed"
[ ! -e "$state.rejected" ] || { cat "$dir/v1.log"; fail "the version 1 file was refused"; }
pending v1
[ "$(wc -l <"$dir/v1.pending")" -eq 41 ] || { cat "$dir/v1.pending"; fail "expected 41 pending extents from the version 1 file"; }
stop_dc v1

# A missing file is the normal first start: nothing said but debug.
rm -f "$state"
start_dc first
grep -q "refused\|error" "$dir/first.log" && { cat "$dir/first.log"; fail "a missing state file was reported"; }
stop_dc first
echo "state: ok"
