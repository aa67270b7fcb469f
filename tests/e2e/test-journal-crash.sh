#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the journal of the pending set survives kill -9
# (issue 24, invariant 10).  JOURNAL_CRASH_ROUNDS rounds (default 100)
# of: start nbdkit discardcache with state= on a 32 MiB file, let
# journal-crash.py check what the start replayed against its model
# (the pending set and the known-clean map at the last completed FLUSH,
# block by block; flushed data read back; every tenth round, a TRIM of
# the whole disk sends exactly what is not known clean), run random
# writes, trims, zeroes and FLUSHes, and kill -9 the server.
#
# Environment: JOURNAL_CRASH_ROUNDS=N, JOURNAL_CRASH_SEED=N (printed),
# JOURNAL_CRASH_KEYS="K=V ..." (added to every start; journal=off must
# make this test fail).
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --version

: "${JOURNAL_CRASH_ROUNDS:=100}"
: "${JOURNAL_CRASH_SEED:=$(( $(date +%s) % 100000 ))}"
: "${JOURNAL_CRASH_KEYS:=}"
export JOURNAL_CRASH_SEED
fast_scratch_setup
echo "journal crash loop: $JOURNAL_CRASH_ROUNDS rounds, seed $JOURNAL_CRASH_SEED"

BLOCKS=8192
truncate -s $(( BLOCKS * 4096 )) "$FASTDIR/disk.img"
read -r -a keys <<< "$JOURNAL_CRASH_KEYS"
for (( round = 1; round <= JOURNAL_CRASH_ROUNDS; round++ )); do
    d=$TESTDIR/r$round
    mkdir -p "$d"
    start_nbdkit -P "$d/pid" -U "$d/sock" "$PLUGIN" backend="$FASTDIR/disk.img" \
        state="$FASTDIR/state" ctl="$d/ctl" delay=1h granularity=4k \
        "${keys[@]}" 2>>"$d/log"
    wait_for_ctl "$d/ctl"
    pid=$(cat "$d/pid")
    if ! /usr/bin/python3 "$abs_top_srcdir/tests/e2e/journal-crash.py" \
        "$d/sock" "$d/ctl" "$DISCARDCTL" "$TESTDIR/model" "$round" "$BLOCKS" \
        "$pid" > "$d/out" 2>&1; then
        cat "$d/out" "$d/log" >&2
        fail "round $round (seed $JOURNAL_CRASH_SEED)"
    fi
    { wait "$pid"; } 2>/dev/null
    _stopped_pids[$pid]=1             # killed by the script: never again
    (( round % 20 && round > 3 )) || tail -1 "$d/out"
    rm -rf "$d"
done
echo "journal crash loop: ok, $JOURNAL_CRASH_ROUNDS kill -9 survived (seed $JOURNAL_CRASH_SEED)"
