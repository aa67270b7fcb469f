#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardfuse: data integrity through the FUSE file, with fio's own
# checksums (verify=crc32c), direct I/O on the loop device, and trims
# racing the flusher.  Twice: on a sparse file, and on an NBD memory
# disk whose trims take 20 ms (nbdkit's delay filter), so that forwarding
# is still running, split at max-discard=1M, while the rewrite comes.
#
#   1. write:   two random-write jobs, [0,128M) and [128M,256M), each
#               verified at its end
#   2. trim:    64 KiB trims over all of [0,128M)           (stonewall)
#   3. rewrite: random writes over [0,64M), starting after the trims'
#               delay, verified at its end                  (stonewall)
#   4. wait until everything is forwarded (the stats file says so)
#   5. verify_only of "rewrite" and of "keep": no discard reached data
#      written after it, nor anything outside what was trimmed
#   6. [64M,128M) reads back as zeros (verify_pattern=0x00): the
#      forwarded discards reached the backend where they should
#
# fio 3.33 aborts in verify mode with trim_percentage, hence separate
# stonewalled jobs.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires_fuse
requires_loop
requires fio --version
requires "$NBDKIT" --version

mktempdir
dir=$TESTDIR
mnt=$dir/mnt
mkdir "$mnt"

# write_jobs DEV: the job file, one section per phase.
write_jobs ()
{
    cat > "$dir/jobs.fio" <<EOF
[global]
filename=$1
direct=1
ioengine=libaio
iodepth=16
bsrange=4k-64k
blockalign=4k
verify=crc32c
verify_fatal=1
randrepeat=1
# no verify state files in the working directory
verify_state_save=0

[keep]
rw=randwrite
offset=128M
size=128M
randseed=11

[trimmed]
rw=randwrite
offset=0
size=128M
randseed=12

[trim]
stonewall
rw=trim
ioengine=psync
iodepth=1
bsrange=64k-64k
offset=0
size=128M
verify=0

[rewrite]
stonewall
startdelay=300ms
rw=randwrite
offset=0
size=64M
randseed=13

[zeros]
rw=read
bsrange=64k-64k
offset=64M
size=64M
verify=pattern
verify_pattern=0x00
EOF
}

# run_fio ARGS...: bounded, output kept for the log.
run_fio ()
{
    timeout 600 fio --output="$dir/fio.out" "$@" "$dir/jobs.fio"
    local r=$?
    grep -E "^(keep|trimmed|trim|rewrite|zeros)|err=|verify|WRITE:|READ:|TRIM:" "$dir/fio.out"
    return $r
}

stats () { cat "$mnt/stats" > "$dir/stats.json" && json_get "$dir/stats.json" "$1"; }

# scenario BACKEND [ENGINE KEYS...]: the six steps above on a fresh mount.
scenario ()
{
    local dev i
    start_discardfuse "$mnt" backend="$1" delay=200ms idle=0 "${@:2}"
    attach_loop "$mnt/disk" || fail "losetup failed"
    dev=$LOOP_DEV
    write_jobs "$dev"

    echo "== write, trim, rewrite (each verified)"
    run_fio --section=keep --section=trimmed --section=trim --section=rewrite ||
        fail "fio write/trim/rewrite failed (see above)"
    trims=$(stats trims)
    [ "$trims" -ge 2048 ] || fail "only $trims trims reached discardfuse"

    echo "== wait for the flusher to forward the rest"
    for (( i = 0; i < 600; i++ )); do
        [ "$(stats pending_bytes)" -eq "$(stats subgranule_bytes)" ] && break
        sleep 0.1
    done
    [ "$(stats pending_bytes)" -eq "$(stats subgranule_bytes)" ] ||
        fail "$(stats pending_bytes) bytes still pending after 60 s"
    echo "trims $(stats trims), forwarded $(stats forwarded) commands ($(stats forwarded_bytes) bytes), cancelled by writes $(stats cancelled_by_writes) bytes, writes that waited $(stats write_waits)"
    [ "$(stats forwarded)" -gt 0 ] || fail "nothing was forwarded"

    echo "== verify again after forwarding"
    run_fio --section=rewrite --verify_only || fail "rewritten data damaged after forwarding"
    run_fio --section=keep --verify_only || fail "data outside the trimmed range damaged"
    run_fio --section=zeros || fail "trimmed and forwarded range does not read back as zeros"
    detach_loop "$dev" || fail "$dev still holds $mnt/disk"
    stop_discardfuse "$mnt" "$DISCARDFUSE_PID" || fail "discardfuse exited with status $?"
}

echo "=== backend: a sparse file"
truncate -s 512M "$dir/backing"
scenario "$dir/backing"

echo "=== backend: NBD memory disk with 20 ms trims"
start_nbdkit -P "$dir/nbdkit.pid" -U "$dir/nbd.sock" --filter=delay memory 512M delay-trim=20ms
# small=off: on this 20 ms device small=auto would hold the pieces under
# 64 KiB, and this test waits for the flusher to forward everything.
scenario "nbd+unix:///?socket=$dir/nbd.sock" max-discard=1M small=off
# 128 forwarded discards of 20 ms each: the rewrite came while they ran.
[ "$(json_get "$dir/stats.json" cancelled_by_writes)" -gt 0 ] ||
    fail "the rewrite cancelled nothing: it did not race the flusher"
echo "fio verify: ok"
