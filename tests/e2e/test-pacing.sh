#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: budget= under sustained load, on the two slow device
# models: fixed cost (one request at a time, every TRIM 20 ms) and size
# proportional (tests/filters/trimcost.c: 1 ms + 4 ms per MiB, holding
# the device alone).  A backlog of 128 MiB in 128 extents is trimmed,
# then fio writes 4 KiB at QD 8 elsewhere with no idle gap for a few
# seconds.  Checked:
#   - with budget=2ms the backlog drains while the writes run, and the
#     writes' p99 stays within the budget (+10%, + a margin, below) of
#     the same writes with no backlog;
#   - with budget=off nothing is forwarded while the writes run (the
#     idle-gated flusher: idle=1h there, so that no gap before, between
#     or after the writes can open it; a paced flusher ignores idle=)
#     and pace_mode says off;
#   - budget= is on by default (2 ms): the stats of a stack started
#     without it say so;
#   - near max-extents a paced flusher forwards regardless (and says so).
# The margin: this machine is shared (the load is often above its two
# cores), and the writes' own p99 moves by about half of itself from run
# to run with nothing forwarded at all; so the margin is half the
# baseline's p99, at least 1 ms.  Forwarding without pacing (idle=0)
# puts the p99 at 20 ms and more on the fixed-cost model, far outside,
# in every run; a model passes if one of up to PACING_TRIES (3) runs is
# within.  PACING_KEYS replaces budget=2ms (e.g. "idle=0", to see the
# test fail).
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires "$NBDKIT" --filter=noparallel --filter=delay memory 1M --version
requires fio --version
requires /usr/bin/python3 -c 'import nbd'
trimcost=$abs_top_builddir/tests/filters/.libs/nbdkit-trimcost-filter.so
[ -e "$trimcost" ] || fail "$trimcost is missing: build first (make check)"
[ -e "$PLUGIN" ] || fail "$PLUGIN is missing: build first (make)"

keys=${PACING_KEYS:-budget=2ms}
budget_ms=2
runtime=${PACING_RUNTIME:-6}
mktempdir

# start NAME MODEL KEYS...: the device model as TESTDIR/NAME-dev.sock and
# discardcache in front of it with KEYS as TESTDIR/NAME.sock, control
# socket TESTDIR/NAME.ctl.
start ()
{
    local name=$1 model=$2
    shift 2
    rm -f "$TESTDIR/$name"*
    case $model in
    fixed)
        start_nbdkit -P "$TESTDIR/$name-dev.pid" -U "$TESTDIR/$name-dev.sock" \
            --filter=noparallel --filter=delay memory 1G \
            serialize=all-requests delay-trim=20ms ;;
    prop)
        start_nbdkit -P "$TESTDIR/$name-dev.pid" -U "$TESTDIR/$name-dev.sock" \
            --filter="$trimcost" memory 1G trimcost-base-us=1000 \
            trimcost-us-per-mib=4000 trimcost-exclusive=true ;;
    esac
    PIDS+=("$NBDKIT_PID")
    start_nbdkit -P "$TESTDIR/$name.pid" -U "$TESTDIR/$name.sock" "$PLUGIN" \
        backend="nbd+unix:///?socket=$TESTDIR/$name-dev.sock" \
        ctl="$TESTDIR/$name.ctl" delay=1s "$@"
    PIDS=("$NBDKIT_PID" "${PIDS[@]}")
    wait_for_ctl "$TESTDIR/$name.ctl"
}

# backlog NAME: 128 MiB in 128 extents, away from where fio writes.
backlog ()
{
    /usr/bin/python3 - "$TESTDIR/$1.sock" <<'EOF' || fail "trimming the backlog failed"
import nbd, sys
h = nbd.NBD()
h.connect_unix(sys.argv[1])
M = 1 << 20
for i in range(128):
    h.trim(M, 512 * M + i * 2 * M)
h.shutdown()
EOF
}

stats ()
{
    "$DISCARDCTL" -s "$TESTDIR/$1.ctl" stats --json >"$TESTDIR/$1.$2.json" ||
        fail "discardctl stats failed"
}

get () { json_get "$TESTDIR/$1.$2.json" "$3"; }

# writes NAME...: the same writes to each NAME at once, in one fio run;
# the write p99 of each in ms in P99[NAME].  The two stacks of a pair run
# at the same time, so that whatever else runs on the machine slows both
# alike.
declare -A P99
writes ()
{
    local name i=0
    local -a jobs=()
    for name; do
        stats "$name" before
        jobs+=(--name="$name" --uri="nbd+unix:///?socket=$TESTDIR/$name.sock")
    done
    fio --output-format=json --output="$TESTDIR/fio.json" --ioengine=nbd \
        --rw=randwrite --bs=4k --iodepth=8 --size=256m --time_based \
        --runtime="$runtime" "${jobs[@]}" >/dev/null ||
        fail "fio failed (output in $TESTDIR/fio.json)"
    for name; do
        stats "$name" after
        P99[$name]=$(/usr/bin/python3 -c 'import json,sys
w = json.load(open(sys.argv[1]))["jobs"][int(sys.argv[2])]["write"]
print("%.3f" % (w["clat_ns"]["percentile"]["99.000000"] / 1e6))' "$TESTDIR/fio.json" "$i")
        i=$(( i + 1 ))
    done
}

stop_all ()
{
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid" nbdkit; done
    PIDS=()
}

# within P99 BASE: P99 <= BASE + budget * 1.1 + max(1, BASE / 2), in ms.
within ()
{
    /usr/bin/python3 -c 'import sys
p99, base, budget = map(float, sys.argv[1:4])
limit = base + budget * 1.1 + max(1.0, base / 2)
print("%.2f" % limit)
sys.exit(0 if p99 <= limit else 1)' "$1" "$2" "$budget_ms"
}

# paired MODEL: one run of the same writes to a stack without backlog and
# to a paced one with the backlog, at the same time.  Fails the test if
# nothing was forwarded; returns 1 if the p99 is over the limit.
paired ()
{
    local model=$1 base paced fwd limit
    start base "$model" budget=2ms
    start paced "$model" $keys
    backlog paced
    writes base paced
    # discardctl's table shows the pacing (checked with budget=2ms only).
    "$DISCARDCTL" -s "$TESTDIR/paced.ctl" stats >"$TESTDIR/table" ||
        fail "discardctl stats failed"
    [[ " $keys " != *" budget=2ms "* ]] ||
        { grep -q "^  pacing: *budget 2000 us, mode " "$TESTDIR/table" &&
          grep -q "^  cost model: " "$TESTDIR/table"; } ||
        fail "$model: discardctl stats shows no pacing: $(cat "$TESTDIR/table")"
    stop_all
    base=${P99[base]} paced=${P99[paced]}
    fwd=$(( $(get paced after forwarded_bytes) - $(get paced before forwarded_bytes) ))
    echo "$model: write p99 ${base} ms without backlog, ${paced} ms with $keys;" \
        "$(( fwd >> 20 )) MiB forwarded during the writes;" \
        "mode $(get paced after pace_mode)," \
        "model a=$(get paced after model_a_us) us" \
        "b=$(get paced after model_b_us_per_gib) us/GiB," \
        "overruns $(get paced after budget_overruns)"
    # The backlog drains while clients never go idle (without budget=,
    # below, nothing goes).  How fast is the benchmark's business: on a
    # loaded machine the fitted model turns cautious (seen in CI: 0.6 MiB
    # in 6 s with the 20 ms device's fit inflated by CPU contention,
    # against 20-50 MiB on a quiet one).
    [ "$fwd" -gt 0 ] ||
        fail "$model: nothing forwarded during ${runtime}s of writes"
    limit=$(within "$paced" "$base") && return 0
    echo "$model: write p99 $paced ms is over $limit ms (baseline $base ms, budget ${budget_ms} ms)"
    return 1
}

# Up to PACING_TRIES runs per model; one within the limit passes.  Under
# make check's parallel load a single run was seen 1% over the limit
# (4.01 ms against 3.98 ms in CI), where forwarding without pacing
# (PACING_KEYS=idle=0) was 3 to 4 times over it in each of three runs
# on the fixed-cost model (42-57 ms against 14-15 ms on a loaded
# machine): a retry tells the two apart.
tries=${PACING_TRIES:-3}
PIDS=()
for model in fixed prop; do
    try=1
    until paired "$model"; do
        [ "$try" -lt "$tries" ] ||
            fail "$model: write p99 over the limit in all $tries runs"
        try=$(( try + 1 ))
        echo "$model: run $try of $tries"
    done
done

# budget=off: the idle-gated flusher: nothing goes while the writes run
# (delay=1s has passed long before they end).  idle=1h: with the default
# 200 ms a loaded machine's gaps (fio starting late, a pause in its
# writes, the stats after it) let the idle flusher go, which is right
# and failed this test in CI ("5 discards were forwarded under load");
# a flusher that paced, or ignored idle=, would still send at once.
start off fixed budget=off idle=1h
backlog off
writes off
"$DISCARDCTL" -s "$TESTDIR/off.ctl" stats >"$TESTDIR/table" ||
    fail "discardctl stats failed"
stop_all
[ "$(get off after forwarded)" = 0 ] ||
    fail "with budget=off, $(get off after forwarded) discards were forwarded under load"
[ "$(get off after pace_mode)" = off ] ||
    fail "with budget=off, pace_mode is $(get off after pace_mode)"
[ "$(get off after pending_bytes)" = $(( 128 << 20 )) ] ||
    fail "with budget=off, pending_bytes is $(get off after pending_bytes)"
! grep -q "pacing:" "$TESTDIR/table" ||
    fail "discardctl stats shows pacing with budget=off"
# The default: paced, 2 ms.
start default fixed
stats default now
stop_all
[ "$(get default now budget_us)" = 2000 ] ||
    fail "by default budget_us is $(get default now budget_us), not 2000"
# Memory first: with 128 extents pending and max-extents=146 (7/8 of it
# is 128), a paced flusher forwards at once, under load, though delay=30s
# has not passed and the budget would not allow it; stats say so.
start mem fixed budget=2ms max-extents=146 delay=30s
backlog mem
runtime=2 writes mem
stop_all
[ "$(get mem after forced_by_memory)" -ge 1 ] ||
    fail "near max-extents: forced_by_memory is $(get mem after forced_by_memory)"
[ "$(get mem after pending_extents)" -lt 128 ] ||
    fail "near max-extents: still $(get mem after pending_extents) extents pending"
echo "memory bound: $(get mem after forced_by_memory) discards forced," \
    "$(get mem after pending_extents) extents pending"
echo "pacing: ok"
