#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache end to end: discard once (invariant 9).  XFS made by plain
# mkfs.xfs (its whole-device TRIM included), mounted -o discard, over
# delay=1s idle=10ms: a file churn, `discardctl flush --wait`, then
# fstrim and a flush.  Every free byte fstrim names was discarded
# already (by mkfs's TRIM or by the filesystem's online discard), so the
# device may get at most 5% of what fstrim trimmed; a second fstrim gets
# nothing through at all.  What the device got is discardcache's
# forwarded_bytes (counted as each backend discard returns).  The
# front-end is $E2E_FRONTEND (nbdkit + nbdfuse, or fuse: discardfuse).
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/e2e-lib.sh"
e2e_requires

mktempdir
dir=$TESTDIR
ctl=$dir/ctl.sock
E2E_MKFS_OPTS='' e2e_start "$dir" 2G delay=1s idle=10ms ctl="$ctl"

/usr/bin/python3 "$abs_top_srcdir/tests/e2e/churn.py" run "$E2E_FS" "$dir/manifest" \
    --seed 42 --rounds 8 --files 60 --max-kib 2048 || fail "churn failed"

# stat_now NAME: one statistic, now.
stat_now ()
{
    timeout 300 "$DISCARDCTL" -s "$ctl" stats --json >"$dir/now.json" ||
        fail "discardctl stats --json failed"
    json_get "$dir/now.json" "$1"
}

flush ()
{
    timeout 300 "$DISCARDCTL" -s "$ctl" flush --wait >/dev/null ||
        fail "discardctl flush --wait failed"
}

# settle: flush until no TRIM has arrived for a second, none is in
# flight and nothing forwardable is pending: XFS sends its last online discards some time after the frees,
# and fstrim's own TRIMs still arrive (through loop and the front-end)
# for a while after fstrim has returned.  Each measurement below then
# counts its own.
settle ()
{
    local i before
    sync -f "$E2E_FS"
    for (( i = 0; i < 30; i++ )); do
        flush
        before=$(stat_now trims)
        sleep 1
        [ "$(stat_now trims)" -eq "$before" ] &&
            [ "$(json_get "$dir/now.json" inflight)" -eq 0 ] &&
            [ "$(json_get "$dir/now.json" pending_bytes)" -eq \
              "$(json_get "$dir/now.json" subgranule_bytes)" ] && return 0
    done
    fail "TRIMs kept arriving for 30 s after the churn"
}

# fstrim_bytes: fstrim -v, and the bytes it says it trimmed.
fstrim_bytes ()
{
    fstrim -v "$E2E_FS" >"$dir/fstrim.out" || fail "fstrim failed"
    cat "$dir/fstrim.out" >&2
    sed -n 's/.*(\([0-9]*\) bytes) trimmed.*/\1/p' "$dir/fstrim.out"
}

settle
sent0=$(stat_now forwarded_bytes)
trimmed1=$(fstrim_bytes)
settle
sent1=$(stat_now forwarded_bytes)
clean1=$(stat_now already_clean_bytes)
trimmed2=$(fstrim_bytes)
settle
sent2=$(stat_now forwarded_bytes)
timeout 300 "$DISCARDCTL" -s "$ctl" stats || fail "discardctl stats failed"

first=$(( sent1 - sent0 )) second=$(( sent2 - sent1 ))
echo "fstrim 1: trimmed $trimmed1 bytes, the device got $first" \
     "(already clean: ${clean1:-none})"
echo "fstrim 2: trimmed $trimmed2 bytes, the device got $second"
[ "$trimmed1" -gt $(( 512 * 1024 * 1024 )) ] ||
    fail "fstrim trimmed only $trimmed1 bytes: the test set-up is wrong"
[ $(( first * 100 )) -le $(( trimmed1 * 5 )) ] ||
    fail "the first fstrim sent the device $first of $trimmed1 bytes (> 5%)"
[ "$second" -eq 0 ] ||
    fail "the second fstrim sent the device $second bytes, expected none"

/usr/bin/python3 "$abs_top_srcdir/tests/e2e/churn.py" verify "$E2E_FS" "$dir/manifest" ||
    fail "checksums differ after fstrim"
e2e_teardown
echo "e2e fstrim twice through $E2E_FRONTEND: ok"
