#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the flusher drains without further input (invariant 8),
# on the real stack: sparse file -> nbdkit discardcache (delay=1s
# idle=10ms) -> nbdfuse -> losetup -> plain mkfs.xfs -> mount -o
# discard -> file churn -> fstrim.  Then nothing: no I/O, no trim, no
# flush request, only `discardctl stats` polled on the control socket.
# Every pending extent that can be forwarded (holding a whole granule;
# minlen is 0) must be gone within delay + idle + a step of the last
# input (with a margin for a loaded machine, said below).  The flusher
# once waited for "the map to change" when the eligible extents were
# sub-granule fragments: 1.9 GiB in 67 extents then stayed pending here
# until the next TRIM, which never came.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/e2e-lib.sh"
e2e_requires

# delay + idle + a step (20 ms), and a margin for a machine shared with
# other builds: a flusher that does not wake never meets it at all.
DELAY_MS=1000 IDLE_MS=10 STEP_MS=20 MARGIN_MS=2000
BOUND_MS=$(( DELAY_MS + IDLE_MS + STEP_MS + MARGIN_MS ))

mktempdir
dir=$TESTDIR
ctl=$dir/ctl.sock
# small=off: every extent holding a granule is forwardable here; what
# small= holds is test-liveness's and test-small's subject (a hole punch
# on a loaded machine can cost milliseconds, enough for small=auto).
e2e_start "$dir" 2G delay=${DELAY_MS}ms idle=${IDLE_MS}ms small=off \
    ctl="$ctl"

/usr/bin/python3 "$abs_top_srcdir/tests/e2e/churn.py" run "$E2E_FS" "$dir/manifest" \
    --seed 7 --rounds 6 --files 60 --max-kib 2048 || fail "churn failed"
sync
fstrim -v "$E2E_FS" || fail "fstrim failed"
now_ms () { echo $(( $(date +%s%N) / 1000000 )); }
stopped=$(now_ms)

# field FILE KEY: a number from discardctl's one-line JSON, without
# starting python (half a second on a loaded machine, longer than the
# bound's step).
field ()
{
    local re="\"$2\":([0-9]+)"
    [[ $(<"$1") =~ $re ]] || fail "no $2 in $1"
    echo "${BASH_REMATCH[1]}"
}

# forwardable FILE: bytes pending that hold whole granules.
forwardable ()
{
    echo $(( $(field "$1" pending_bytes) - $(field "$1" subgranule_bytes) ))
}

drained=
while :; do
    "$DISCARDCTL" -s "$ctl" stats --json >"$dir/stats.json" ||
        fail "discardctl stats failed"
    left=$(forwardable "$dir/stats.json")
    elapsed=$(( $(now_ms) - stopped ))
    if [ "$left" -eq 0 ]; then
        drained=$elapsed
        break
    fi
    [ "$elapsed" -le $(( BOUND_MS + 8000 )) ] || break
    sleep 0.05
done
"$DISCARDCTL" -s "$ctl" stats || fail "discardctl stats failed"
trims=$(field "$dir/stats.json" trims)
[ "$trims" -gt 0 ] || fail "no trims reached the engine"
[ -n "$drained" ] ||
    fail "$left forwardable bytes still pending $elapsed ms after the last input"
echo "liveness: forwardable pending bytes reached 0 ${drained} ms after fstrim" \
     "returned (bound ${BOUND_MS} ms: delay ${DELAY_MS} + idle ${IDLE_MS} +" \
     "step ${STEP_MS} + margin ${MARGIN_MS}); $(field "$dir/stats.json" \
     pending_extents) sub-granule extents left"
[ "$drained" -le "$BOUND_MS" ] ||
    fail "drained only after $drained ms, past the bound of $BOUND_MS ms"

# And it stays so: still nothing forwardable a second later.
sleep 1
"$DISCARDCTL" -s "$ctl" stats --json >"$dir/stats.json" || fail "discardctl stats failed"
[ "$(forwardable "$dir/stats.json")" -eq 0 ] || fail "forwardable bytes pending again"
e2e_teardown
