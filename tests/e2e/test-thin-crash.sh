#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: thin mode survives kill -9.  Each round starts nbdkit in
# thin mode on the same backend and meta=, checks every slot whose
# content is certain (data, and the mapping through extents: a trimmed
# slot is a hole), writes and trims with patterns unique to the slot and
# the round, flushes, leaves more writes and trims unflushed, and kills
# the server with SIGKILL.  The backend starts full of random bytes, so a
# slot exposing stale or another slot's data shows.  A reuse reserve of a
# quarter of the pool (reserve=2M) keeps freed runs across the kills and
# discards the largest past it, so a reserve run that came back mapped
# would be written over live data and show.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'

mktempdir
dir=$TESTDIR
head -c 8M /dev/urandom > "$dir/disk.img"
keys=(thin=on slot=64k size=16M reserve=2M "meta=$dir/meta" ctl=none delay=1h
      idle=0)

for round in 1 2 3 4 5; do
    start_nbdkit -P "$dir/$round.pid" -U "$dir/$round.sock" "$PLUGIN" \
        backend="$dir/disk.img" "${keys[@]}"
    /usr/bin/python3 "$abs_top_srcdir/tests/e2e/thin-crash.py" "$dir/$round.sock" \
        "$dir" "$round" 256 65536 || fail "round $round"
    kill -KILL "$NBDKIT_PID"
    wait "$NBDKIT_PID" 2>/dev/null
    stop_pid "$NBDKIT_PID" nbdkit
    echo "round $round: killed; meta file $(stat -c %s "$dir/meta") bytes"
done

# A last restart checks the fifth round, then a clean stop.
start_nbdkit -P "$dir/last.pid" -U "$dir/last.sock" "$PLUGIN" \
    backend="$dir/disk.img" "${keys[@]}" statsfile="$dir/stats.json" \
    ctl="$dir/ctl.sock"
/usr/bin/python3 "$abs_top_srcdir/tests/e2e/thin-crash.py" "$dir/last.sock" \
    "$dir" 6 256 65536 || fail "after the last kill"
# discardctl shows the pool and the map: one line per run of the map
# (as many as the statistics' mapped runs), as many slots as are
# mapped, no physical slot twice.
wait_for_ctl "$dir/ctl.sock"
"$DISCARDCTL" -s "$dir/ctl.sock" stats | grep -E '^  (thin|slots|slot use|journal):'
"$DISCARDCTL" -s "$dir/ctl.sock" stats --json > "$dir/live.json"
"$DISCARDCTL" -s "$dir/ctl.sock" dump --map > "$dir/map.txt" ||
    fail "discardctl dump --map"
mapped=$(json_get "$dir/live.json" thin_mapped)
runs=$(json_get "$dir/live.json" thin_mapped_runs)
slot=$(json_get "$dir/live.json" thin_slot)
[ "$(wc -l < "$dir/map.txt")" -eq "$runs" ] ||
    fail "dump --map shows $(wc -l < "$dir/map.txt") runs, stats $runs"
[ "$(awk -v s="$slot" '{ n += $3 / s } END { print n }' "$dir/map.txt")" -eq "$mapped" ] ||
    fail "dump --map's runs do not add up to the $mapped mapped slots"
sort -n -k2 "$dir/map.txt" |
    awk '$2 < end { bad = 1 } { end = $2 + $3 } END { exit bad }' ||
    fail "dump --map: a physical slot is mapped twice"
stop_pidfile "$dir/last.pid" nbdkit
wait_for_file "$dir/stats.json" || fail "no statistics"
echo "thin mapped $(json_get "$dir/stats.json" thin_mapped)," \
     "reused $(json_get "$dir/stats.json" thin_reused)," \
     "from the reserve $(json_get "$dir/stats.json" thin_reserve_writes)," \
     "reserve $(json_get "$dir/stats.json" thin_reserve_bytes) bytes," \
     "commits $(json_get "$dir/stats.json" thin_commits)"
[ "$(json_get "$dir/stats.json" thin_reserve_bytes)" -gt 0 ] ||
    fail "the reserve was empty at the end: the rounds did not exercise it"
echo "thin crash: ok"
