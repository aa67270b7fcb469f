#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the circuit breaker (invariant 11), through the nbdkit
# plugin on NBD backends built from nbdkit's own filters.
#  1. Errors: nbdkit's error filter fails every trim while a file
#     exists.  The breaker opens after breaker-errors errors, exactly,
#     and sends nothing while open; writes meanwhile succeed and read
#     back; once the errors stop a probe closes it by itself and every
#     pending discard is forwarded.  One log line per change.
#  2. The same under the concurrent verifier: trims fail for the whole
#     run, the data is intact, the stop forwards everything.
#  3. Latency: nbdkit's delay filter makes every trim slower than
#     breaker-latency: it opens with reason latency and holds;
#     `discardctl resume` closes it by hand.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/protect-lib.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"
requires "$NBDKIT" --filter=error --filter=delay memory 1M --version
requires /usr/bin/python3 -c 'import nbd'

verify_setup
dir=$TESTDIR

# 1. Errors.
touch "$dir/trim-fails"
start_nbdkit -P "$dir/dev.pid" -U "$dir/dev.sock" --filter=error memory 64M \
    error-trim=EIO error-trim-rate=100% error-trim-file="$dir/trim-fails"
start_nbdkit -P "$dir/dc.pid" -U "$dir/dc.sock" "$PLUGIN" \
    backend="nbd+unix:///?socket=$dir/dev.sock" delay=0 idle=0 budget=off \
    breaker-errors=3 breaker-backoff=3s ctl="$dir/ctl.sock" 2>"$dir/dc.log"
wait_for_ctl "$dir/ctl.sock"
ctl=$dir/ctl.sock
[ "$(ctl_stat "$ctl" breaker_state)" = closed ] || fail "the breaker starts open"
nbd_io "$dir/dc.sock" '
for i in range(16):
    h.pwrite(bytes([i + 1]) * 65536, i << 20)
for i in range(16):
    h.trim(65536, i << 20)'
wait_stat "$ctl" breaker_state open 10
[ "$(ctl_stat "$ctl" breaker_reason)" = errors ] || fail "the reason is not errors"
[ "$(ctl_stat "$ctl" forward_errors)" -eq 3 ] ||
    fail "opened after $(ctl_stat "$ctl" forward_errors) errors, not 3"
# Held: nothing more reaches the backend before the probe (3 s).
sleep 1.5
[ "$(ctl_stat "$ctl" forward_errors)" -eq 3 ] || fail "discards sent while open"
[ "$(ctl_stat "$ctl" forwarded)" -eq 0 ] || fail "discards forwarded while open"
[ "$(ctl_stat "$ctl" pending_bytes)" -eq $(( 16 << 16 )) ] ||
    fail "pending is $(ctl_stat "$ctl" pending_bytes), not all 16 trims"
# Writes are never held, and what they wrote reads back.
nbd_io "$dir/dc.sock" '
for i in range(16):
    h.pwrite(bytes([0x80 + i]) * 4096, (i << 20) + 65536)
h.flush()
for i in range(16):
    assert h.pread(4096, (i << 20) + 65536) == bytes([0x80 + i]) * 4096, i'
[ "$(ctl_stat "$ctl" breaker_state)" = open ] || fail "the breaker closed by itself while trims fail"
# The errors stop: a probe closes it, everything pending goes.
rm "$dir/trim-fails"
wait_stat "$ctl" breaker_state closed 20
wait_stat "$ctl" pending_bytes 0 10
[ "$(ctl_stat "$ctl" forwarded_bytes)" -eq $(( 16 << 16 )) ] ||
    fail "forwarded $(ctl_stat "$ctl" forwarded_bytes) bytes after closing"
[ "$(ctl_stat "$ctl" breaker_probes)" -ge 1 ] || fail "closed without a probe"
nbd_io "$dir/dc.sock" '
for i in range(16):
    assert h.pread(4096, (i << 20) + 65536) == bytes([0x80 + i]) * 4096, i'
[ "$(grep -c 'circuit breaker open' "$dir/dc.log")" -eq 1 ] ||
    { cat "$dir/dc.log"; fail "not one log line for opening"; }
[ "$(grep -c 'circuit breaker closed' "$dir/dc.log")" -eq 1 ] ||
    { cat "$dir/dc.log"; fail "not one log line for closing"; }
stop_pidfile "$dir/dc.pid" nbdkit
echo "breaker on errors: ok"

# 2. The verifier, trims failing until its final check.
touch "$dir/verify-trim-fails"
start_nbdkit -P "$dir/vdev.pid" -U "$dir/vdev.sock" --filter=error memory 64M \
    error-trim=EIO error-trim-rate=100% error-trim-file="$dir/verify-trim-fails"
verify_run breaker "nbd+unix:///?socket=$dir/vdev.sock" \
    "delay=0 idle=0 budget=off breaker-errors=3 breaker-backoff=1s" \
    --ops "$(verify_ops 5000)" \
    --flush-cmd "rm -f '$dir/verify-trim-fails'" --cmd-interval 3600000
verify_expect breaker breaker_opened -ge 1
verify_expect breaker dropped_error_bytes -eq 0
[ "$(verify_stat breaker pending_bytes)" -eq "$(verify_stat breaker subgranule_bytes)" ] ||
    fail "breaker: whole granules still pending after the stop"

# 3. Latency: every trim takes 400 ms, the bound is 100 ms for 1 s.
start_nbdkit -P "$dir/slow.pid" -U "$dir/slow.sock" --filter=delay memory 64M \
    delay-trim=400ms
start_nbdkit -P "$dir/dcs.pid" -U "$dir/dcs.sock" "$PLUGIN" \
    backend="nbd+unix:///?socket=$dir/slow.sock" delay=0 idle=0 budget=off \
    breaker-errors=off breaker-latency=100ms breaker-window=1s \
    breaker-backoff=1h ctl="$dir/ctls.sock" 2>"$dir/dcs.log"
wait_for_ctl "$dir/ctls.sock"
ctl=$dir/ctls.sock
nbd_io "$dir/dcs.sock" '
for i in range(20):
    h.trim(65536, i << 20)'
wait_stat "$ctl" breaker_state open 20
[ "$(ctl_stat "$ctl" breaker_reason)" = latency ] || fail "the reason is not latency"
sent=$(ctl_stat "$ctl" forwarded)
[ "$sent" -ge 3 ] && [ "$sent" -lt 20 ] || fail "opened after $sent slow discards"
sleep 1.5
[ "$(ctl_stat "$ctl" forwarded)" -eq "$sent" ] || fail "discards forwarded while open"
"$DISCARDCTL" -s "$ctl" resume >/dev/null || fail "discardctl resume"
[ "$(ctl_stat "$ctl" breaker_state)" != open ] || fail "resume left the breaker open"
grep -q 'circuit breaker closed by hand' "$dir/dcs.log" || fail "no log line for resume"
for (( i = 0; i < 50; i++ )); do
    [ "$(ctl_stat "$ctl" forwarded)" -gt "$sent" ] && break
    sleep 0.1
done
[ "$(ctl_stat "$ctl" forwarded)" -gt "$sent" ] || fail "nothing forwarded after resume"
echo "breaker: ok"
