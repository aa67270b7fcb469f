#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: forwarding windows (invariant 11), through discardfuse
# and the nbdkit plugin.  A window that excludes now holds every pending
# discard (delay=0, idle=0: they would go at once) until `discardctl
# flush`; a window that includes now forwards as usual; a bad window is
# refused naming the key and the forms.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/protect-lib.sh"
requires_fuse
requires fallocate --version
requires /usr/bin/python3 -c 'import nbd'

mktempdir
dir=$TESTDIR
KEYS="delay=0 idle=0 budget=off"
# Windows in local time: one that opens in 2 hours (so excludes now),
# one that began an hour ago.
later="$(date -d '+2 hours' +%H:%M)-$(date -d '+3 hours' +%H:%M)"
around="$(date -d '-1 hour' +%H:%M)-$(date -d '+1 hour' +%H:%M)"

# 1. discardfuse, the window excludes now.
truncate -s 64M "$dir/disk.img"
mkdir "$dir/mnt"
start_discardfuse "$dir/mnt" backend="$dir/disk.img" $KEYS window="$later" \
    ctl="$dir/fuse.ctl"
wait_for_ctl "$dir/fuse.ctl"
dd if=/dev/urandom of="$dir/mnt/disk" bs=1M count=4 conv=notrunc,fsync status=none
fallocate -p -o 0 -l 4M "$dir/mnt/disk" || fail "fallocate -p on discardfuse"
[ "$(ctl_stat "$dir/fuse.ctl" trim_bytes)" -eq $(( 4 << 20 )) ] || fail "the trim did not arrive"
[ "$(ctl_stat "$dir/fuse.ctl" window_open)" = false ] || fail "the window is open now"
sleep 2
[ "$(ctl_stat "$dir/fuse.ctl" forwarded)" -eq 0 ] || fail "forwarded outside the window"
[ "$(ctl_stat "$dir/fuse.ctl" pending_bytes)" -eq $(( 4 << 20 )) ] || fail "not pending"
[ "$(stat -c %b "$dir/disk.img")" -ge 8192 ] || fail "the backend's blocks were freed"
"$DISCARDCTL" -s "$dir/fuse.ctl" flush >/dev/null || fail "discardctl flush"
[ "$(ctl_stat "$dir/fuse.ctl" pending_bytes)" -eq 0 ] || fail "pending after the flush"
[ "$(ctl_stat "$dir/fuse.ctl" forwarded_bytes)" -eq $(( 4 << 20 )) ] || fail "flush forwarded too little"
[ "$(stat -c %b "$dir/disk.img")" -eq 0 ] || fail "the backend still holds blocks after the flush"
stop_discardfuse "$dir/mnt" "$DISCARDFUSE_PID"
echo "window (discardfuse): ok"

# 2. The plugin, a window that includes now (two window= keys, the first
# later).
truncate -s 64M "$dir/disk2.img"
start_nbdkit -P "$dir/nbd.pid" -U "$dir/nbd.sock" "$PLUGIN" \
    backend="$dir/disk2.img" $KEYS window="$later" window="$around" \
    ctl="$dir/nbd.ctl"
wait_for_ctl "$dir/nbd.ctl"
[ "$(ctl_stat "$dir/nbd.ctl" window_open)" = true ] || fail "the window is closed now"
nbd_io "$dir/nbd.sock" '
h.pwrite(b"\x11" * (1 << 20), 0)
h.trim(1 << 20, 0)'
wait_stat "$dir/nbd.ctl" forwarded_bytes $(( 1 << 20 )) 10
stop_pidfile "$dir/nbd.pid" nbdkit
echo "window (plugin, open): ok"

# 3. Bad windows change nothing: refused with the key and the forms.
for bad in 25:00-01:00 1:00-02:00 10:00-10:00 10:00 10:00-11:00, 10:60-11:00; do
    "$NBDKIT" -f -U "$dir/bad.sock" "$PLUGIN" backend="$dir/disk2.img" \
        window="$bad" 2>"$dir/bad.err" && fail "window=$bad accepted"
    grep -q "window=$bad.*HH:MM-HH:MM" "$dir/bad.err" ||
        { cat "$dir/bad.err"; fail "window=$bad: no message naming the forms"; }
done
echo "window: ok"
