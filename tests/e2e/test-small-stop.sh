#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: a clean stop with many tiny extents pending, in front of
# the slow device model (one command at a time, 5 ms a TRIM), keeps its
# bound (issue 23).  600 extents of 4 KiB would take 3 s to forward one
# by one; with stop-timeout=500ms:
#   - small=off: the stop sends at most what fits in the bound and
#     counts the rest in dropped_stop_bytes;
#   - small=auto: the first discards measure the device (5 ms a command
#     whatever its size), then the 4 KiB extents are held and left,
#     counted in dropped_small_bytes;
#   - state=: the stop sends nothing and saves all 600; the next start
#     loads them, and an explicit flush (discardctl flush --wait) sends
#     them.
# Commands are counted in the device's log, not timed: the statsfile
# accounts for every byte (forwarded + dropped = trimmed).
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'

N=600
BOUND_CMDS=$(( 500 / 5 + 2 ))    # stop-timeout / 5 ms, and the one in flight

mktempdir
dir=$TESTDIR
start_nbdkit -P "$dir/dev.pid" -U "$dir/dev.sock" --filter=noparallel \
    --filter=log --filter=delay memory 64M serialize=all-requests \
    delay-trim=5ms logfile="$dir/dev.log"
dev="nbd+unix:///?socket=$dir/dev.sock"

# device_trims: Trim commands the device has started so far.
device_trims () { grep -c ' Trim id=.*fua=' "$dir/dev.log" || true; }

start_dc ()
{
    local name=$1
    shift
    rm -f "$dir/$name.pid" "$dir/$name.sock"
    start_nbdkit -P "$dir/$name.pid" -U "$dir/$name.sock" "$PLUGIN" \
        backend="$dev" ctl="$dir/$name.ctl" statsfile="$dir/$name.json" \
        stop-timeout=500ms "$@" 2>"$dir/$name.log"
    wait_for_ctl "$dir/$name.ctl"
}

# tiny NAME: N trims of 4 KiB, 12 KiB apart (nothing merges).
tiny ()
{
    /usr/bin/python3 - "$dir/$1.sock" "$N" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
for i in range(int(sys.argv[2])):
    h.trim(4096, i * 16384)
h.shutdown()
PY
}

# stop NAME: SIGTERM and wait; sets SENT to the device's Trim commands
# during the stop.
stop ()
{
    local before
    before=$(device_trims)
    stop_pidfile "$dir/$1.pid" nbdkit
    SENT=$(( $(device_trims) - before ))
}

get () { json_get "$dir/$1.json" "$2"; }

# accounted NAME: every trimmed byte forwarded or dropped, by reason.
accounted ()
{
    local fwd drop small stopb
    fwd=$(get "$1" forwarded_bytes) drop=$(get "$1" dropped_bytes)
    small=$(get "$1" dropped_small_bytes) stopb=$(get "$1" dropped_stop_bytes)
    [ $(( fwd + drop )) -eq $(( N * 4096 )) ] ||
        fail "$1: forwarded $fwd + dropped $drop bytes, trimmed $(( N * 4096 ))"
    [ $(( small + stopb )) -eq "$drop" ] ||
        fail "$1: dropped $drop bytes, of which small $small and stop $stopb"
    [ "$(get "$1" pending_extents)" -eq 0 ] || fail "$1: extents still pending"
}

# small=off: the bound alone.
start_dc off small=off
tiny off
stop off
[ "$SENT" -ge 1 ] && [ "$SENT" -le "$BOUND_CMDS" ] ||
    fail "small=off: the stop sent $SENT discards, bound $BOUND_CMDS (of $N pending)"
accounted off
[ "$(get off dropped_stop_bytes)" -gt 0 ] || fail "small=off: nothing left at the bound?"
grep -q "not forwarded within stop-timeout=" "$dir/off.log" ||
    fail "small=off: the stop did not say what it left: $(cat "$dir/off.log")"

# small=auto: measured, then held.
start_dc auto
tiny auto
stop auto
[ "$SENT" -le "$BOUND_CMDS" ] || fail "small=auto: the stop sent $SENT discards"
accounted auto
[ "$(get auto small_len)" -eq 65536 ] ||
    fail "small=auto: threshold $(get auto small_len) on a 5 ms device, expected 65536"
[ "$(get auto dropped_small_bytes)" -eq $(( (N - SENT) * 4096 )) ] ||
    fail "small=auto: $(get auto dropped_small_bytes) bytes held, sent $SENT of $N"

# state=: saved, reloaded, sent by an explicit flush.
start_dc save state="$dir/state"
tiny save
stop save
[ "$SENT" -eq 0 ] || fail "state=: the stop sent $SENT discards"
[ -s "$dir/state" ] || fail "state=: no state file"
[ "$(get save pending_extents)" -eq "$N" ] || fail "state=: $(get save pending_extents) saved"
start_dc load state="$dir/state"
"$DISCARDCTL" -s "$dir/load.ctl" stats --json >"$dir/load.live.json" || fail "stats failed"
[ "$(json_get "$dir/load.live.json" state_loaded_extents)" -eq "$N" ] ||
    fail "state=: $(json_get "$dir/load.live.json" state_loaded_extents) extents reloaded"
before=$(device_trims)
"$DISCARDCTL" -s "$dir/load.ctl" flush --wait >/dev/null || fail "discardctl flush failed"
[ $(( $(device_trims) - before )) -eq "$N" ] ||
    fail "explicit flush sent $(( $(device_trims) - before )) of $N held extents"
stop load
[ "$(get load forwarded_bytes)" -eq $(( N * 4096 )) ] || fail "state=: not all forwarded"
echo "small-stop: $N tiny extents; stops sent $BOUND_CMDS at most; state= kept and reloaded them"
