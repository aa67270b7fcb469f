#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the journal of the pending set survives kill -9
# (issue 24, invariant 10).  JOURNAL_CRASH_ROUNDS rounds (default 100)
# of: start nbdkit discardcache with state= on a 32 MiB file, let
# journal-crash.py check what the start replayed against its model
# (the pending set and the known-clean map at the last completed FLUSH,
# block by block; flushed data read back; every tenth round, a TRIM of
# the whole disk sends exactly what is not known clean), run random
# writes, trims, zeroes and FLUSHes, and kill -9 the server.  Then a
# fifth as many rounds through discardfuse (writes, hole punches and
# fsyncs on its disk file).
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
read -r -a keys <<< "$JOURNAL_CRASH_KEYS"

# crash_loop FRONTEND ROUNDS: nbdkit (the checks' client is libnbd) or
# fuse (discardfuse; the client works on its disk file, and the dead
# mount a kill -9 leaves is lazily unmounted).
crash_loop ()
{
    local frontend=$1 rounds=$2 round d pid target
    rm -f "$FASTDIR/disk.img" "$FASTDIR/state" "$FASTDIR/state.journal" "$TESTDIR/model"
    truncate -s $(( BLOCKS * 4096 )) "$FASTDIR/disk.img"
    for (( round = 1; round <= rounds; round++ )); do
        d=$TESTDIR/r$round
        mkdir -p "$d/mnt"
        local -a common=(backend="$FASTDIR/disk.img" state="$FASTDIR/state"
                         ctl="$d/ctl" delay=1h granularity=4k "${keys[@]}")
        if [ "$frontend" = nbdkit ]; then
            start_nbdkit -P "$d/pid" -U "$d/disk.sock" "$PLUGIN" "${common[@]}" 2>>"$d/log"
            pid=$(cat "$d/pid") target=$d/disk.sock
        else
            start_discardfuse "$d/mnt" "${common[@]}" 2>>"$d/log"
            pid=$DISCARDFUSE_PID target=$d/mnt/disk
        fi
        wait_for_ctl "$d/ctl"
        if ! /usr/bin/python3 "$abs_top_srcdir/tests/e2e/journal-crash.py" \
            "$target" "$d/ctl" "$DISCARDCTL" "$TESTDIR/model" "$round" "$BLOCKS" \
            "$pid" > "$d/out" 2>&1; then
            cat "$d/out" "$d/log" >&2
            fail "$frontend round $round (seed $JOURNAL_CRASH_SEED)"
        fi
        { wait "$pid"; } 2>/dev/null
        _stopped_pids[$pid]=1             # killed by the script: never again
        [ "$frontend" = nbdkit ] || fusermount3 -u -z "$d/mnt" 2>/dev/null
        (( round % 20 && round > 3 )) || echo "$frontend $(tail -1 "$d/out")"
        rm -rf "$d"
    done
}

crash_loop nbdkit "$JOURNAL_CRASH_ROUNDS"
if [ -c /dev/fuse ] && [ -x "$DISCARDFUSE" ]; then
    crash_loop fuse $(( (JOURNAL_CRASH_ROUNDS + 4) / 5 ))
else
    [ "${CI:-}" != true ] || fail "discardfuse rounds need /dev/fuse and a built discardfuse"
    echo "journal crash loop: discardfuse rounds skipped (no /dev/fuse)"
fi
echo "journal crash loop: ok, $JOURNAL_CRASH_ROUNDS + $(( (JOURNAL_CRASH_ROUNDS + 4) / 5 )) kill -9 survived (seed $JOURNAL_CRASH_SEED)"
