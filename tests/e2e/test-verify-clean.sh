#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the known-clean map (invariant 9) under the concurrent
# verifier, and one directed case on the device's own log.
#
# The verifier runs with --trim-zeroes: every completed trim must read
# as zeros (the engine reads pending discards as zeros, and a sparse
# file's discard punches a hole), not as old data or zeros.  With
# delay=0 idle=0 trims are forwarded at once, so most later trims land
# on known-clean space and are skipped; a write that failed to make its
# granule dirty would leave its data under a skipped trim: a mismatch.
# Then with max-clean-extents=16, so that the map forgets all the time:
# the map stays within its bound and nothing reads wrong.  Whether any
# trim still lands on one of 16 remembered ranges depends on timing (a
# TSan build runs a tenth of the operations), so it is not asserted.
#
# Directed: nbdkit's log filter shows what the device receives.  A range
# trimmed and forwarded is known clean: trimming it again sends nothing.
# A write inside it (a whole block, then 512 bytes) makes its granule
# dirty: the next trim over the range sends exactly that granule.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --filter=log memory 1M --version

verify_setup
verify_run_file clean "delay=0 idle=0" \
    --ops "$(verify_ops 40000)" --unaligned 0 --trim-zeroes
verify_expect clean already_clean_bytes -gt 0
verify_expect clean forwarded -gt 0
verify_run_file clean-bound "delay=0 idle=0 max-clean-extents=16" \
    --ops "$(verify_ops 20000)" --unaligned 0 --trim-zeroes
verify_expect clean-bound clean_forgotten_bytes -gt 0
verify_expect clean-bound clean_extents -le 16

# The directed case.
dir=$TESTDIR
start_nbdkit -P "$dir/dev.pid" -U "$dir/dev.sock" --filter=log memory 64M \
    logfile="$dir/dev.log"
start_nbdkit -P "$dir/dc.pid" -U "$dir/dc.sock" "$PLUGIN" \
    backend="nbd+unix:///?socket=$dir/dev.sock" delay=1h ctl="$dir/ctl"
wait_for_ctl "$dir/ctl"

# client PYTHON: run PYTHON with h connected to discardcache.
client ()
{
    /usr/bin/python3 -c "
import nbd, sys
h = nbd.NBD(); h.connect_unix(sys.argv[1])
$1
h.shutdown()" "$dir/dc.sock" || fail "client failed: $1"
}

# device_trims: the device's Trim commands so far, "offset count" a line.
device_trims ()
{
    sed -n 's/.* Trim id=[0-9]* offset=\(0x[0-9a-f]*\) count=\(0x[0-9a-f]*\) .*/\1 \2/p' \
        "$dir/dev.log" | while read -r o c; do echo $((o)) $((c)); done
}

# trim_and_flush: trim [0, 1 MiB), forward it; the Trims it caused.
trim_and_flush ()
{
    local before
    before=$(device_trims | wc -l)
    client 'h.trim(1 << 20, 0)'
    "$DISCARDCTL" -s "$dir/ctl" flush --wait >/dev/null || fail "flush --wait failed"
    device_trims | tail -n +$(( before + 1 ))
}

client 'h.pwrite(b"\x11" * (1 << 20), 0)'
[ "$(trim_and_flush | awk '{ n += $2 } END { print n }')" -eq $(( 1 << 20 )) ] ||
    fail "the first trim did not reach the device whole"
[ -z "$(trim_and_flush)" ] || fail "a trim over known-clean space reached the device"
client 'h.pwrite(b"\x22" * 4096, 256 * 1024)'
sent=$(trim_and_flush)
[ "$sent" = "262144 4096" ] ||
    fail "after a write inside known-clean space the trim sent '$sent', expected the written block: '262144 4096'"
client 'h.pwrite(b"\x33" * 512, 512 * 1024 + 100)'
sent=$(trim_and_flush)
[ "$sent" = "524288 4096" ] ||
    fail "after a 512-byte write the trim sent '$sent', expected its whole granule: '524288 4096'"
client '
d = h.pread(1 << 20, 0)
assert d == bytes(1 << 20), "the trimmed range does not read as zeros"'
"$DISCARDCTL" -s "$dir/ctl" stats || fail "discardctl stats failed"
stop_pidfile "$dir/dc.pid" nbdkit
echo "verify clean: ok ($VERIFY_OPS_TOTAL operations verified, and the directed case)"
