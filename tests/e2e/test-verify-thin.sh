#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the concurrent verifier in thin mode, exported size twice
# the backend's.  Run "reuse": 4k slots and a trim-heavy mix, so freed
# slots come back (their pending discards cancelled) and every block is
# checked, also after a restart from meta=; a reuse reserve of 1/128 of
# the pool (reserve=256k) takes freed runs first and sends the largest
# past it to the engine, whose pending discards the next writes cancel.
# Run "full": 64k slots, which sub-slot trims rarely free, so the pool
# runs out: writes needing a new slot fail with ENOSPC (the verifier then
# takes their blocks as unknown) and nothing else may change.  The backends start full of
# random bytes, as a used disk would: a new slot must still read as zeros
# wherever it was not written.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"

verify_setup
fast=$FASTDIR

head -c 32M /dev/urandom > "$fast/reuse.img"
VERIFY_RESTART_KEYS="thin=on slot=4k size=64M reserve=256k meta=$fast/reuse.meta"
verify_run reuse "$fast/reuse.img" \
    "delay=200ms idle=0 $VERIFY_RESTART_KEYS" \
    --ops "$(verify_ops 30000)" --mix 35,45,12,3,5 --allow-enospc
verify_expect reuse thin_reused -gt 0
verify_expect reuse thin_reserve_writes -gt 0
verify_expect reuse thin_reserve_released -gt 0
verify_expect reuse thin_allocated -gt 0
echo "reuse: $(verify_result reuse write_enospc) writes failed with ENOSPC"

head -c 16M /dev/urandom > "$fast/full.img"
VERIFY_RESTART_KEYS="thin=on slot=64k size=32M meta=$fast/full.meta"
verify_run full "$fast/full.img" \
    "delay=200ms idle=0 $VERIFY_RESTART_KEYS" \
    --ops "$(verify_ops 20000)" --mix 60,20,5,3,12 --large-trims 0 \
    --allow-enospc
[ "$(verify_result full write_enospc)" -gt 0 ] ||
    fail "full: no write failed with ENOSPC: the pool never ran out"
verify_expect full thin_enospc -gt 0
# Trims go on while the pool is full, and writes take back what they
# free at once: the pool ends (nearly) full, not exactly full.
verify_expect full thin_mapped -ge 240
echo "verify thin: ok ($VERIFY_OPS_TOTAL operations verified)"
