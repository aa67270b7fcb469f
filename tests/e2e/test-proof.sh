#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: proof of effect (invariant 11).  The backends are NBD
# servers built from nbdkit's own filters and a file:
#  1. A store that acknowledges discards and frees nothing below 64 KiB
#     while it advertises 4 KiB blocks (blocksize-policy over blocksize
#     minblock=64k, which ignores the unaligned part of a trim, as arrays
#     ignoring unaligned UNMAPs and the kernel rbd driver do): the
#     checked bytes are ineffective, the log says so once, with a cause;
#     through the nbdkit plugin and through discardfuse.
#  2. The same store with proof-adapt=on: the forwarding granularity is
#     raised, said in the log, until discards free space again.
#  3. Effective stores (nbdkit memory with whole pages, a file): checked
#     bytes, none ineffective.
#  4. A block device: nothing reliable, so no check (and it says so).
#  5. proof=off checks nothing.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/protect-lib.sh"
requires "$NBDKIT" --filter=blocksize-policy --filter=blocksize memory 1M --version
requires /usr/bin/python3 -c 'import nbd'

mktempdir
dir=$TESTDIR
KEYS="delay=0 idle=0 budget=off"

# A store that ignores trims smaller than 64 KiB (and says 4 KiB).
start_nbdkit -P "$dir/store.pid" -U "$dir/store.sock" \
    --filter=blocksize-policy --filter=blocksize memory 64M minblock=64k \
    blocksize-minimum=512 blocksize-preferred=4096 blocksize-maximum=32M
LAZY="nbd+unix:///?socket=$dir/store.sock"

# write_trim SOCKET SIZE N [BASE]: write then trim N ranges of SIZE bytes,
# 1 MiB apart from BASE (default 0).
write_trim ()
{
    nbd_io "$1" "
for i in range($3):
    h.pwrite(b'\\x5a' * $2, ${4:-0} + (i << 20))
for i in range($3):
    h.trim($2, ${4:-0} + (i << 20))"
}

# start_dc NAME BACKEND KEYS...: the plugin with a control socket.
start_dc ()
{
    local name=$1 backend=$2
    shift 2
    start_nbdkit -P "$dir/$name.pid" -U "$dir/$name.sock" "$PLUGIN" \
        backend="$backend" ctl="$dir/$name.ctl" "$@" 2>"$dir/$name.log"
    wait_for_ctl "$dir/$name.ctl"
}

# 1. Ineffective, through the plugin.
start_dc lazy "$LAZY" $KEYS proof=100%
write_trim "$dir/lazy.sock" 4096 8
wait_stat "$dir/lazy.ctl" proof_checks 8 20
[ "$(ctl_stat "$dir/lazy.ctl" proof_checked_bytes)" -eq $(( 8 * 4096 )) ] ||
    fail "checked $(ctl_stat "$dir/lazy.ctl" proof_checked_bytes) bytes, not 32768"
[ "$(ctl_stat "$dir/lazy.ctl" proof_ineffective_bytes)" -eq $(( 8 * 4096 )) ] ||
    fail "lazy store: ineffective $(ctl_stat "$dir/lazy.ctl" proof_ineffective_bytes) bytes, not 32768"
[ "$(grep -c 'proof of effect:' "$dir/lazy.log")" -eq 1 ] ||
    { cat "$dir/lazy.log"; fail "not one log line for ineffective discards"; }
grep 'proof of effect:' "$dir/lazy.log" | grep -q 'likely cause: .*granularity' ||
    fail "the log line names no likely cause"
"$DISCARDCTL" -s "$dir/lazy.ctl" stats --format=prometheus |
    grep -q '^discardcache_proof_ineffective_bytes_total 32768$' ||
    fail "Prometheus lacks the ineffective bytes"
# Proof is not an error: nothing failed, nothing is retried.
[ "$(ctl_stat "$dir/lazy.ctl" forward_errors)" -eq 0 ] || fail "counted as errors"
[ "$(ctl_stat "$dir/lazy.ctl" granularity)" -eq 4096 ] ||
    fail "the granularity changed without proof-adapt"
stop_pidfile "$dir/lazy.pid" nbdkit
echo "ineffective (plugin): ok"

# 1b. The same through discardfuse: a hole punched in its disk file.
if [ -c /dev/fuse ] && fusermount3 --version >/dev/null 2>&1; then
    mkdir "$dir/mnt"
    start_discardfuse "$dir/mnt" backend="$LAZY" $KEYS proof=100% \
        ctl="$dir/fuse.ctl" 2>"$dir/fuse.log"
    wait_for_ctl "$dir/fuse.ctl"
    for i in 0 1 2 3; do
        dd if=/dev/urandom of="$dir/mnt/disk" bs=4096 count=1 \
           seek=$(( (i + 16) * 256 )) conv=notrunc status=none
    done
    sync "$dir/mnt/disk"
    for i in 0 1 2 3; do
        fallocate -p -o $(( (i + 16) << 20 )) -l 4096 "$dir/mnt/disk" ||
            fail "fallocate -p on discardfuse"
    done
    wait_stat "$dir/fuse.ctl" proof_checks 4 20
    [ "$(ctl_stat "$dir/fuse.ctl" proof_ineffective_bytes)" -eq $(( 4 * 4096 )) ] ||
        fail "discardfuse: ineffective $(ctl_stat "$dir/fuse.ctl" proof_ineffective_bytes)"
    stop_discardfuse "$dir/mnt" "$DISCARDFUSE_PID"
    [ "$(grep -c 'proof of effect:' "$dir/fuse.log")" -eq 1 ] ||
        { cat "$dir/fuse.log"; fail "discardfuse: not one log line"; }
    echo "ineffective (discardfuse): ok"
else
    [ "${CI:-}" = true ] && fail "no FUSE under CI"
    echo "ineffective (discardfuse): skipped, no FUSE"
fi

# 2. proof-adapt=on: each ineffective check at the granularity in force
# doubles it; trims of that size (not 64 KiB-aligned) keep proving it,
# until at 64 KiB they free space.
start_dc adapt "$LAZY" $KEYS proof=100% proof-adapt=on
for round in 1 2 3 4 5; do
    g=$(ctl_stat "$dir/adapt.ctl" granularity)
    [ "$g" -ge 65536 ] && break
    checks=$(ctl_stat "$dir/adapt.ctl" proof_checks)
    write_trim "$dir/adapt.sock" "$g" 1 $(( (round << 22) + g ))
    wait_stat "$dir/adapt.ctl" proof_checks $(( checks + 1 )) 20
done
[ "$(ctl_stat "$dir/adapt.ctl" granularity)" -eq 65536 ] ||
    fail "proof-adapt left the granularity at $(ctl_stat "$dir/adapt.ctl" granularity)"
[ "$(ctl_stat "$dir/adapt.ctl" proof_adapted)" -eq 4 ] || fail "not raised 4 times"
grep -q 'forwarding granularity raised to 65536' "$dir/adapt.log" ||
    fail "the raise to 64 KiB is not in the log"
ineffective=$(ctl_stat "$dir/adapt.ctl" proof_ineffective_bytes)
checks=$(ctl_stat "$dir/adapt.ctl" proof_checks)
write_trim "$dir/adapt.sock" 131072 2 $(( 40 << 20 ))
wait_stat "$dir/adapt.ctl" proof_checks $(( checks + 2 )) 20
[ "$(ctl_stat "$dir/adapt.ctl" proof_ineffective_bytes)" -eq "$ineffective" ] ||
    fail "discards at the raised granularity are still ineffective"
stop_pidfile "$dir/adapt.pid" nbdkit
echo "proof-adapt: ok"

# 3. Effective stores report nothing ineffective.
start_nbdkit -P "$dir/memstore.pid" -U "$dir/memstore.sock" memory 64M
start_dc mem "nbd+unix:///?socket=$dir/memstore.sock" $KEYS proof=100%
write_trim "$dir/mem.sock" 65536 8
wait_stat "$dir/mem.ctl" proof_checks 8 20
[ "$(ctl_stat "$dir/mem.ctl" proof_ineffective_bytes)" -eq 0 ] ||
    fail "nbdkit memory: ineffective $(ctl_stat "$dir/mem.ctl" proof_ineffective_bytes)"
[ "$(ctl_stat "$dir/mem.ctl" proof_checked_bytes)" -eq $(( 8 * 65536 )) ] ||
    fail "nbdkit memory: checked $(ctl_stat "$dir/mem.ctl" proof_checked_bytes)"
! grep -q 'proof of effect:' "$dir/mem.log" || fail "effective store: logged ineffective"
stop_pidfile "$dir/mem.pid" nbdkit
stop_pidfile "$dir/memstore.pid" nbdkit

truncate -s 64M "$dir/disk.img"
start_dc file "$dir/disk.img" $KEYS proof=100%
write_trim "$dir/file.sock" 65536 8
wait_stat "$dir/file.ctl" proof_checks 8 20
[ "$(ctl_stat "$dir/file.ctl" proof_ineffective_bytes)" -eq 0 ] ||
    fail "file: ineffective $(ctl_stat "$dir/file.ctl" proof_ineffective_bytes)"
[ "$(ctl_stat "$dir/file.ctl" proof_supported)" = true ] || fail "file: not supported"
stop_pidfile "$dir/file.pid" nbdkit
echo "effective: ok"

# 4. A block device cannot say what it freed: no check, and the
# statistics say so (no guess).
if [ "$(id -u)" -eq 0 ] && losetup -f >/dev/null 2>&1; then
    truncate -s 64M "$dir/blk.img"
    attach_loop "$dir/blk.img" || fail "losetup"
    start_dc blk "$LOOP_DEV" $KEYS proof=100%
    write_trim "$dir/blk.sock" 65536 4
    wait_stat "$dir/blk.ctl" forwarded 4 20
    [ "$(ctl_stat "$dir/blk.ctl" proof_supported)" = false ] ||
        fail "block device: proof claimed supported"
    [ "$(ctl_stat "$dir/blk.ctl" proof_checks)" -eq 0 ] || fail "block device: checked"
    "$DISCARDCTL" -s "$dir/blk.ctl" stats | grep -q 'proof of effect: *not possible' ||
        fail "block device: the table does not say proof is not possible"
    stop_pidfile "$dir/blk.pid" nbdkit
    detach_loop "$LOOP_DEV"
    echo "block device: ok"
else
    [ "${CI:-}" = true ] && fail "no root or loop device under CI"
    echo "block device: skipped, needs root and a loop device"
fi

# 5. proof=off.
start_dc off "$LAZY" $KEYS proof=off
write_trim "$dir/off.sock" 4096 4 $(( 50 << 20 ))
wait_stat "$dir/off.ctl" forwarded 4 20
sleep 0.5
[ "$(ctl_stat "$dir/off.ctl" proof_checks)" -eq 0 ] || fail "proof=off checked"
stop_pidfile "$dir/off.pid" nbdkit
echo "proof: ok"
