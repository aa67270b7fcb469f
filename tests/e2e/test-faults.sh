#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: backend faults under the concurrent verifier.  The
# backend is an NBD server (nbdkit memory, fresh for each run) behind
# fault filters:
#  1. nbdkit's error filter: writes, zeroes and reads fail with EIO now
#     and then, a quarter of the discards fail.  Write, zero and read
#     errors reach the client as EIO; failed discards stay pending, are
#     retried with backoff and counted (forward_errors, last_error);
#     nothing acknowledged is lost, and the stop still forwards it all.
#  2. The same discard errors with flush-discards=true: no client FLUSH
#     fails because a discard did.
#  3. A store that answers ENOTSUP to trim after a while (tests/filters/
#     enotsup.c): forwarding turns off, the statistics say
#     discard_supported false, what was pending is dropped and counted,
#     clients' trims keep succeeding; cached and passthrough.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"
requires "$NBDKIT" --filter=error memory 1M --version
enotsup=$abs_top_builddir/tests/filters/.libs/nbdkit-enotsup-filter.so
[ -e "$enotsup" ] || fail "$enotsup is missing: build first (make check)"

verify_setup
dir=$TESTDIR

# start_dev NAME NBDKIT-ARGS...: a fresh backend server; sets DEV_URI.
start_dev ()
{
    local name=$1
    shift
    start_nbdkit -P "$dir/dev-$name.pid" -U "$dir/dev-$name.sock" "$@" \
        2>>"$dir/dev-$name.log"
    DEV_URI="nbd+unix:///?socket=$dir/dev-$name.sock"
}

# assert_client_errno NAME OP: OP failed at the client, always with EIO.
assert_client_eio ()
{
    [ "$(verify_result "$1" "$2_errors")" -gt 0 ] || fail "$1: no $2 errors injected"
    [ "$(verify_result "$1" "$2_errors")" -eq "$(verify_result "$1" "$2_eio")" ] ||
        fail "$1: $2 errors other than EIO reached the client"
}

# 1. Random EIO.  Read errors stop (error-pread-file) when the verifier
# runs its flush command, just before the final check, which must read
# every block.
# A run scaled down (the sanitizer builds: VERIFY_SCALE=10) raises the
# rarer errors' rates, up to five times, so that each still fails a few
# requests: at 1% of a tenth of the reads, a TSan run once saw none.
boost=$(( 100 / VERIFY_SCALE ))
[ "$boost" -ge 1 ] || boost=1
[ "$boost" -le 5 ] || boost=5
touch "$dir/read-errors"
start_dev eio --filter=error memory 64M \
    error-pwrite=EIO error-pwrite-rate=2% \
    error-zero=EIO error-zero-rate=$(( 3 * boost ))% \
    error-trim=EIO error-trim-rate=25% \
    error-pread=EIO error-pread-rate=$(( 1 * boost ))% \
    error-pread-file="$dir/read-errors"
verify_run eio "$DEV_URI" "delay=0 idle=0 budget=off" \
    --ops "$(verify_ops 20000)" --expect-errors \
    --flush-cmd "rm -f '$dir/read-errors'" --cmd-interval 3600000
assert_client_eio eio write
assert_client_eio eio zero
assert_client_eio eio read
[ "$(verify_result eio trim_errors)" -eq 0 ] || fail "eio: a trim failed at the client"
verify_expect eio forward_errors -gt 0
verify_expect eio last_error -eq 5            # EIO
verify_expect eio discard_supported -eq 1
# Retried until they went through, the stop included.
[ "$(verify_stat eio pending_bytes)" -eq "$(verify_stat eio subgranule_bytes)" ] ||
    fail "eio: whole granules still pending after the stop"
verify_expect eio dropped_error_bytes -eq 0

# 2. Discard errors under flush-discards=true.
start_dev flush --filter=error memory 64M error-trim=EIO error-trim-rate=25%
verify_run eio-flush "$DEV_URI" "delay=1s idle=0 flush-discards=true" \
    --ops "$(verify_ops 10000)" --mix 40,30,12,10,8
verify_expect eio-flush forward_errors -gt 0
[ "$(verify_result eio-flush flush_errors)" -eq 0 ] ||
    fail "eio-flush: a client FLUSH failed because of a discard"

# 3. ENOTSUP after the first 300 trims (fewer in smaller runs), cached
# and passthrough.
after=$(( 300 * VERIFY_SCALE / 100 ))
[ "$after" -ge 10 ] || after=10
for mode in cached passthrough; do
    keys="delay=0 idle=0 budget=off"
    [ $mode = passthrough ] && keys="passthrough=true"
    start_dev "$mode" --filter="$enotsup" memory 64M enotsup-after=$after
    verify_run "enotsup-$mode" "$DEV_URI" "$keys" --ops "$(verify_ops 10000)"
    verify_expect "enotsup-$mode" discard_supported -eq 0
    verify_expect "enotsup-$mode" forwarded -ge "$after"
    verify_expect "enotsup-$mode" dropped_unsupported_bytes -gt 0
    [ "$(verify_result "enotsup-$mode" trim_errors)" -eq 0 ] ||
        fail "enotsup-$mode: a trim failed at the client"
done
echo "faults: ok ($VERIFY_OPS_TOTAL operations verified)"
