#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: crash and restart (issue 6, section 2).  In a loop,
# nbdkit discardcache serves a sparse file while the verifier drives
# writes, trims, zeroes and flushes (and discardctl flush / set beside
# them); at a random moment (seeded) the server gets kill -9, and the
# verifier saves its model of what each block may hold.  The next start
# (every other one with state=FILE) is checked with --verify-durable:
# every block holds its content as of the last completed flush (or FUA
# command) or that of a later command; a trim or zero since allows
# zeros.  Every fourth round also stops cleanly: the state file saved
# then must be loaded by the next start.  With journal=off (one round in
# four) after a kill -9 there is no state file left to apply
# (state_loaded_extents is 0); with the journal the set of the last
# FLUSH is replayed, and the durable check covers it.
#
# Environment:
#   CRASH_ROUNDS=N        rounds (default 20, 8 in sanitizer builds,
#                         where VERIFY_SCALE < 100; the long mode: 500)
#   CRASH_SEED=N          seed of the kill times and the verifier
#                         (default: from the clock; printed)
#   CRASH_EXTRA_ARGS="K=V ..."  plugin keys added to every start
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"
requires jq --version

: "${CRASH_ROUNDS:=$(( VERIFY_SCALE >= 100 ? 20 : 8 ))}"
: "${CRASH_SEED:=$VERIFY_SEED}"
: "${CRASH_EXTRA_ARGS:=}"
verify_setup

# dc_start NAME KEYS...: the plugin with ctl= and KEYS, pid in
# $dir/NAME.pid; sets LOADED to its state_loaded_extents.
dc_start ()
{
    local name=$1
    shift
    rm -f "$dir/$name.pid" "$dir/$name.sock" "$dir/$name.ctl"
    start_nbdkit -P "$dir/$name.pid" -U "$dir/$name.sock" "$PLUGIN" \
        ctl="$dir/$name.ctl" "$@" 2>>"$dir/$name.log"
    wait_for_ctl "$dir/$name.ctl"
    LOADED=$("$DISCARDCTL" -s "$dir/$name.ctl" stats --json |
                 jq -r .state_loaded_extents)
    [ -n "$LOADED" ] && [ "$LOADED" != null ] || fail "$name: no state_loaded_extents"
}

# dc_verify NAME OUT VERIFY-OPTIONS...: the verifier against server NAME,
# in the background (VERIFY_PID), output in OUT, with discardctl flush
# and set beside it (not with NO_CTL=1: the flusher then keeps what it
# has pending, for a state file).
dc_verify ()
{
    local name=$1 out=$2 ctl
    local -a cmds=()
    shift 2
    ctl="$DISCARDCTL -s $dir/$name.ctl"
    [ -n "${NO_CTL:-}" ] ||
        cmds=(--ctl-cmd "$ctl flush" --ctl-cmd "$ctl set delay=$(( RANDOM % 50 ))ms"
              --ctl-cmd "$ctl flush --wait")
    "$VERIFY" --uri "nbd+unix:///?socket=$dir/$name.sock" \
        --until-disconnect --save-model "$model" --cmd-interval 200 \
        "${cmds[@]}" "${CRASH_VERIFY_ARGS[@]}" "$@" > "$out" 2>&1 &
    VERIFY_PID=$!
    cleanup_fn stop_pid "$VERIFY_PID" verify
}

# dc_verify_done OUT: wait for the verifier, fail on a mismatch; count.
dc_verify_done ()
{
    local out=$1
    wait "$VERIFY_PID" || verify_failed "round $round" "$out"
    _stopped_pids[$VERIFY_PID]=1
    CRASH_TOTAL_OPS=$(( CRASH_TOTAL_OPS + $(verify_result_of "$out" ops) ))
    CRASH_ANYTHING=$(( CRASH_ANYTHING + $(verify_result_of "$out" crash_anything) ))
}

# dc_kill NAME OUT: once the verifier runs its workload, kill -9 the
# server after a seeded random 50-1500 ms.
dc_kill ()
{
    local name=$1 out=$2 pid i
    pid=$(cat "$dir/$name.pid")
    for (( i = 0; i < 600; i++ )); do
        grep -q '^verify: running' "$out" && break
        kill -0 "$VERIFY_PID" 2>/dev/null || break
        sleep 0.1
    done
    grep -q '^verify: running' "$out" || { cat "$out"; fail "round $round: the verifier did not start its workload"; }
    sleep "$(printf '%d.%03d' 0 $(( 50 + RANDOM % 950 )))"
    (( RANDOM % 3 )) || sleep 0.5
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    _stopped_pids[$pid]=1           # its pid may be reused: never signal it again
    CRASH_KILLS=$(( CRASH_KILLS + 1 ))
}

# crash_loop NAME BACKEND ROUNDS "KEYS": ROUNDS rounds on BACKEND (a
# fresh 32 MiB disk) with the plugin keys KEYS (and CRASH_EXTRA_ARGS).
crash_loop ()
{
    local name=$1 backend=$2 rounds=$3 keys=$4 round loaded_before shown
    local -a pkeys common
    read -r -a pkeys <<< "$keys $CRASH_EXTRA_ARGS"
    dir=$TESTDIR/$name
    mkdir -p "$dir"
    state=$dir/state model=$dir/model
    RANDOM=$CRASH_SEED
    CRASH_KILLS=0 CRASH_TOTAL_OPS=0 CRASH_ANYTHING=0
    echo "== crash loop $name: backend=$backend $keys $CRASH_EXTRA_ARGS ($rounds rounds, seed $CRASH_SEED)"
    for (( round = 1; round <= rounds; round++ )); do
        common=(backend="$backend" "${pkeys[@]}")
        # Rounds that stop cleanly (round % 4 == 3) keep their trims
        # pending, so that there is a state file to save.
        case $(( round % 4 == 3 ? 2 : round % 3 )) in
            0) common+=(delay=0 idle=0) ;;
            1) common+=(delay=30ms idle=5ms) ;;
            2) common+=(delay=10s) ;;
        esac
        case $(( round % 5 )) in
            1) common+=(max-extents=64 on-full=forward) ;;
            2) common+=(flush-discards=true) ;;
            3) common+=(granularity=64k) ;;
        esac
        # A start without state= must not write the backend while a
        # journal's checkpoint waits beside it (the man page, JOURNAL): a
        # crashed server's files are removed first, as a user must.
        if (( round % 2 )); then common+=(state="$state"); else rm -f "$state" "$state.journal"; fi
        # journal=off on every fourth: then nothing survives a kill -9.
        # With the journal (invariant 10) the pending set at the last
        # FLUSH does, and --verify-durable checks that it never discards
        # flushed data.
        local nojournal=$(( round % 4 == 1 ))
        (( nojournal )) && common+=(journal=off)
        shown=${common[*]:1}
        shown=${shown//$state/FILE}
        local -a vopts=(--seed $(( CRASH_SEED + round )) --ops 0 --seconds 60)
        [ -e "$model" ] && vopts+=(--load-model "$model" --verify-durable)

        dc_start "r$round" "${common[@]}"
        if (( nojournal )); then
            # What a journal left is replayed, then consumed: nothing of
            # it is left to apply after this round's kill -9.
            [ ! -e "$state" ] && [ ! -e "$state.journal" ] || fail "round $round: journal=off did not consume the state file and its journal"
        fi
        (( !nojournal )) || [ ! -e "$state" ] || fail "round $round: a state file exists while the server runs"

        if (( round % 4 == 3 )); then
            # A clean stop with state=: saved, and loaded by the next start.
            NO_CTL=1 dc_verify "r$round" "$dir/r$round.out" "${vopts[@]}" --ops 3000
            dc_verify_done "$dir/r$round.out"
            stop_pidfile "$dir/r$round.pid" nbdkit
            [ -s "$state" ] || fail "round $round: no state file after a clean stop"
            dc_start "r$round.clean" "${common[@]}"
            [ "$LOADED" -gt 0 ] || fail "round $round: the state file of a clean stop was not loaded"
            [ -e "$state.journal" ] || [ ! -e "$state" ] || fail "round $round: the state file was not consumed"
            loaded_before=$LOADED
            # Nothing crashed: the whole model must hold, not just the
            # durable part.
            dc_verify "r$round.clean" "$dir/r$round.clean.out" \
                --seed $(( CRASH_SEED + round + 100000 )) --ops 0 --seconds 60 \
                --load-model "$model"
            dc_kill "r$round.clean" "$dir/r$round.clean.out"
            dc_verify_done "$dir/r$round.clean.out"
            echo "round $round ($shown): clean stop, $loaded_before extents loaded from the state file, then kill -9"
        else
            dc_verify "r$round" "$dir/r$round.out" "${vopts[@]}"
            dc_kill "r$round" "$dir/r$round.out"
            dc_verify_done "$dir/r$round.out"
            echo "round $round ($shown): kill -9 after $(verify_result_of "$dir/r$round.out" ops) operations" \
                 "($(verify_result_of "$dir/r$round.out" disconnect_errors) commands in flight)"
        fi
        (( !nojournal )) || [ ! -e "$state" ] || fail "round $round: a state file exists after kill -9"
    done

    # The last check, on a server that then stops cleanly.
    dc_start final backend="$backend" "${pkeys[@]}"
    "$VERIFY" --uri "nbd+unix:///?socket=$dir/final.sock" \
        --load-model "$model" --verify-durable --verify-only \
        "${CRASH_VERIFY_ARGS[@]}" > "$dir/final.out" || verify_failed "the final check" "$dir/final.out"
    stop_pidfile "$dir/final.pid" nbdkit
    echo "crash loop $name: ok, $CRASH_KILLS kills, $CRASH_TOTAL_OPS operations," \
         "$(verify_result_of "$dir/final.out" checked) blocks checked at the end;" \
         "crash checks let $CRASH_ANYTHING blocks hold anything (too many changes since a flush," \
         "or too many failed writes)"
    ALL_KILLS=$(( ALL_KILLS + CRASH_KILLS )) ALL_OPS=$(( ALL_OPS + CRASH_TOTAL_OPS ))
}

ALL_KILLS=0 ALL_OPS=0
CRASH_VERIFY_ARGS=()
truncate -s 32M "$FASTDIR/file.img"
crash_loop file "$FASTDIR/file.img" "$CRASH_ROUNDS" ""
# Behind an NBD server that outlives every kill: requests sent to it
# just before the kill may still run there (on each of the plugin's
# connections, the one the server is running and those it still reads
# from the socket's buffer; the connections run side by side).
# --threads=1: nbdkit 1.32.4 and 1.32.5 abort ("raw_send_socket:
# Assertion `sock >= 0' failed") when a client hangs up with several
# requests in flight on one connection: the worker thread that sees the
# hang-up closes the socket under another that is about to send its
# reply (fixed upstream in 1.33.10, commit 9d82aa4f "server: Don't
# assert on send if client hangs up early", which names this
# workaround).  One thread per connection cannot race with itself.
start_nbdkit -P "$TESTDIR/mem.pid" -U "$TESTDIR/mem.sock" --threads=1 memory 32M
crash_loop nbd "nbd+unix:///?socket=$TESTDIR/mem.sock" $(( (CRASH_ROUNDS + 1) / 2 )) ""
kill -0 "$(cat "$TESTDIR/mem.pid")" 2>/dev/null ||
    fail "the device server (nbdkit memory) died during the crash loop"
# Thin mode on a 16 MiB file exported as 32 MiB: the pool runs out, and
# writes fail with ENOSPC (--allow-enospc: each sector of theirs may then
# hold the old data or the write's, nothing else).  Each start
# recovers the slot map from meta= as the kill left it.
truncate -s 16M "$FASTDIR/thin.img"
CRASH_VERIFY_ARGS=(--allow-enospc)
crash_loop thin "$FASTDIR/thin.img" $(( (CRASH_ROUNDS + 1) / 2 )) \
    "thin=on slot=64K meta=$TESTDIR/thin.meta size=32M"
CRASH_VERIFY_ARGS=()
echo "crash-restart: ok ($ALL_KILLS kill -9 survived, $ALL_OPS operations verified, seed $CRASH_SEED)"
