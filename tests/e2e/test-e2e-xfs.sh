#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache end to end on a real filesystem: sparse file -> nbdkit
# discardcache -> nbdfuse (or discardfuse, with E2E_FRONTEND=fuse: see
# test-fuse-e2e-xfs.sh) -> losetup -> mkfs.xfs -> mount -o discard ->
# file churn with checksums -> fstrim -> remount and verify ->
# discardctl stats, flush --wait --progress, dump -> teardown.
# Then: every file intact, TRIMs cancelled by writes, forwarded discard
# commands at most 25% of TRIMs received, nothing forgotten, and the
# backing file's allocation down to about what the filesystem used, both
# right after the flush (nbdkit still running) and after the stop.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/e2e-lib.sh"
e2e_requires

mktempdir
dir=$TESTDIR
ctl=$dir/ctl.sock
e2e_start "$dir" 1G delay=5s idle=100ms ctl="$ctl"

/usr/bin/python3 "$abs_top_srcdir/tests/e2e/churn.py" run "$E2E_FS" "$dir/manifest" \
    --seed 42 --rounds 8 --files 60 --max-kib 2048 || fail "churn failed"
/usr/bin/python3 "$abs_top_srcdir/tests/e2e/churn.py" verify "$E2E_FS" "$dir/manifest" ||
    fail "checksums differ after churn"
fstrim -v "$E2E_FS" || fail "fstrim failed"
used=$(e2e_fs_used "$E2E_FS")
live=$(e2e_live_stats)
if [ -n "$live" ]; then
    # The front-end's statistics while it runs: valid JSON, trims counted.
    cp "$live" "$dir/live.json" || fail "cannot read $live"
    python3 -m json.tool "$dir/live.json" >/dev/null || fail "$live is not JSON"
    [ "$(json_get "$dir/live.json" trims)" -gt 0 ] || fail "$live counts no trims"
fi

# Remount: the data must come back from the backend, not the page cache.
umount "$E2E_FS"
mount "$E2E_DEV" "$E2E_FS" || fail "remount failed"
/usr/bin/python3 "$abs_top_srcdir/tests/e2e/churn.py" verify "$E2E_FS" "$dir/manifest" ||
    fail "checksums differ after remount"

# The control socket on the live stack: after a forced flush nothing but
# sub-granule fragments is pending, and the space is back already.
timeout 300 "$DISCARDCTL" -s "$ctl" stats || fail "discardctl stats failed"
if [ -n "$live" ]; then
    # discardfuse's stats file and discardctl stats --json are one
    # snapshot format: the same keys, and the same client-side counters
    # (no client I/O runs now; the flusher may move the rest).
    cp "$live" "$dir/file.json" || fail "cannot read $live"
    timeout 300 "$DISCARDCTL" -s "$ctl" stats --json >"$dir/ctl.json" ||
        fail "discardctl stats --json failed"
    /usr/bin/python3 - "$dir/file.json" "$dir/ctl.json" <<'PY' || fail "stats file and discardctl disagree"
import json, sys
f, c = (json.load(open(p)) for p in sys.argv[1:3])
assert f.keys() == c.keys(), "keys differ: %s" % (f.keys() ^ c.keys())
for k in ("trims", "trim_bytes", "cancelled_by_writes", "cancelled_by_zeroes",
          "granularity", "max_discard", "max_extents"):
    assert f[k] == c[k], "%s: stats file %s, discardctl %s" % (k, f[k], c[k])
print("stats file matches discardctl stats --json")
PY
fi
timeout 300 "$DISCARDCTL" -s "$ctl" flush --wait --progress || fail "discardctl flush failed"
timeout 300 "$DISCARDCTL" -s "$ctl" dump >"$dir/dump" || fail "discardctl dump failed"
echo "after the flush: $(wc -l <"$dir/dump") sub-granule extents pending"
timeout 300 "$DISCARDCTL" -s "$ctl" stats --json >"$dir/live.json" || fail "discardctl stats --json failed"
live_pending=$(json_get "$dir/live.json" pending_bytes)
live_subgranule=$(json_get "$dir/live.json" subgranule_bytes)
[ "$live_pending" -eq "$live_subgranule" ] ||
    fail "after flush --wait, $live_pending bytes pending, only $live_subgranule sub-granule"
[ "$(awk '{ n += $2 } END { print n + 0 }' "$dir/dump")" -eq "$live_pending" ] ||
    fail "dump and stats disagree on the pending bytes"
live_alloc=$(e2e_allocated "$dir/backing")
echo "after the flush, before the stop: backing file allocated $live_alloc bytes"
[ "$live_alloc" -le $(( used + 32 * 1024 * 1024 )) ] ||
    fail "after flush --wait the backing file holds $live_alloc bytes, the filesystem uses $used"

e2e_teardown
wait_for_file "$dir/stats.json" || fail "no statistics written"
e2e_print_stats "$dir/stats.json"
alloc=$(e2e_allocated "$dir/backing")
echo "filesystem used $used bytes, backing file allocated $alloc bytes"

trims=$(json_get "$dir/stats.json" trims)
forwarded=$(json_get "$dir/stats.json" forwarded)
cancelled=$(json_get "$dir/stats.json" cancelled_by_writes)
pending=$(json_get "$dir/stats.json" pending_bytes)
subgranule=$(json_get "$dir/stats.json" subgranule_bytes)
[ "$trims" -gt 100 ] || fail "only $trims trims received: discard did not reach discardcache"
[ "$cancelled" -gt 0 ] || fail "no trimmed bytes were cancelled by writes"
[ $(( forwarded * 4 )) -le "$trims" ] || fail "forwarded $forwarded commands for $trims trims (> 25%)"
[ "$pending" -eq "$subgranule" ] || fail "$pending bytes still pending after stop, only $subgranule sub-granule"
# Nothing forgotten: allocation within the filesystem's use plus 32 MiB
# (the log and metadata the filesystem zeroed or wrote outside df's sum).
[ "$alloc" -le $(( used + 32 * 1024 * 1024 )) ] ||
    fail "backing file holds $alloc bytes, the filesystem uses $used"
echo "e2e xfs through $E2E_FRONTEND: ok"
