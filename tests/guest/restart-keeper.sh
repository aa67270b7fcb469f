#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest (tests/guest/run): restarts under a mounted
# filesystem through the keeper (issue 37).  discardcache on a file, the
# device attached with `discardctl attach --connections=CONNECTIONS`,
# XFS (or ext4) mounted with -o discard, a writer that fsyncs files
# without a pause (restart-writer.py); then TERMS restarts by SIGTERM
# and one by kill -9, each new server started on the same socket with
# the same state=; after the first, the keeper is killed and
# `attach --adopt` takes the device over.  Checked: the writer saw no
# error, nor did the kernel; each SIGTERM stop ended within
# stop-timeout= + 1 s; every connection was handed back after each
# restart and the keeper is idle after; after a clean unmount
# xfs_repair -n (e2fsck -fn) is clean and every file the writer kept is
# intact.  Printed: each stop's and start's time and the longest
# write+fsync around each restart (the pause it caused).
#
#   restart-keeper.sh [TERMS [CONNECTIONS [xfs|ext4 [KILLS]]]]
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"

terms=${1:-3} conns=${2:-2} fs=${3:-xfs} kills=${4:-1}
STOP_MS=2000
W=/tmp/rk-$fs
mkdir -p $W /mnt/rk
out=$GUEST_OUT/restart-$fs
: > "$out.result"
exec 2> >(tee -a "$out.log" >&2)
case $fs in
xfs) mkfs=(mkfs.xfs -q -f) fsck=(xfs_repair -n) ;;
ext4) mkfs=(mkfs.ext4 -q -F) fsck=(e2fsck -fn) ;;
*) fail "unknown filesystem $fs" ;;
esac
# The kernel's counts before this run (another may have run in this boot).
ioerr0=$(dmesg | grep -c "I/O error, dev nbd0")
reconn0=$(dmesg | grep -c "nbd0: reconnected socket")

[ -e /dev/nbd0 ] || modprobe nbd || fail "modprobe nbd failed"
truncate -s 1G $W/disk.img

# nbdkit leaves its socket behind, and will not bind over it.
server ()
{
    rm -f $W/dc.sock
    "$NBDKIT" -f -U $W/dc.sock -P $W/dc.pid "$PLUGIN" backend=$W/disk.img \
        state=$W/state ctl=$W/dc.ctl stop-timeout=${STOP_MS}ms \
        2>>"$GUEST_OUT/nbdkit.log" &
    SERVER=$!
    wait_started "$SERVER" nbdkit 30 test -S $W/dc.sock
}

# The device, the mount and the writer are torn down whatever happens.
teardown ()
{
    touch $W/stop
    umount_if_mounted /mnt/rk
    "$DISCARDCTL" detach /dev/nbd0 2>/dev/null
    [ -n "${SERVER:-}" ] && stop_pid "$SERVER" nbdkit
}
cleanup_fn teardown

server
export DISCARDCACHE_KEEPER_DIR=$W
"$DISCARDCTL" attach $W/dc.sock /dev/nbd0 --connections=$conns --dead-timeout=60s \
    --log="$out.keeper.log" || fail "discardctl attach failed"
# A second attach of the same device is refused, and says why.
"$DISCARDCTL" attach $W/dc.sock /dev/nbd0 2>$W/err && fail "a second attach succeeded"
grep -q "connected already" $W/err || fail "second attach: $(cat $W/err)"
[ "$(cat /sys/block/nbd0/size)" -eq $(( 1 << 21 )) ] || fail "nbd0 has the wrong size"
[ -s $W/nbd0.keeper.pid ] || fail "no keeper pidfile"
"${mkfs[@]}" /dev/nbd0 || fail "${mkfs[*]} failed"
mount -o discard /dev/nbd0 /mnt/rk || fail "mount failed"

restart_writer () { /usr/bin/python3 "$abs_top_srcdir/tests/guest/restart-writer.py" "$@"; }
# (Not through the function: $! must be the writer itself.)
/usr/bin/python3 "$abs_top_srcdir/tests/guest/restart-writer.py" write /mnt/rk $W $W/stop &
writer=$!
sleep 3

# restart HOW: stop the server (TERM or KILL) and start the next one.
restart ()
{
    local t0 t1 t2
    t0=$(date +%s%N)
    kill -"$1" "$SERVER"
    wait "$SERVER"
    t1=$(date +%s%N)
    server
    t2=$(date +%s%N)
    RESTARTS+=("$1 $(( t0 / 1000000 )) $(( (t1 - t0) / 1000000 )) $(( (t2 - t1) / 1000000 ))")
    sleep 3
}
# The keeper killed (-9) after the first restart: `attach --adopt` keeps
# the device as it is, and the next restarts go through the new keeper.
readopt ()
{
    local old
    old=$(cat $W/nbd0.keeper.pid)
    kill -KILL "$old"
    "$DISCARDCTL" attach $W/dc.sock /dev/nbd0 --connections=$conns --dead-timeout=60s \
        --adopt --log="$out.keeper.log" || fail "discardctl attach --adopt failed"
    [ "$(cat $W/nbd0.keeper.pid)" != "$old" ] || fail "no new keeper after --adopt"
    echo "keeper killed and adopted again" | tee -a "$out.result"
}
RESTARTS=()
for (( i = 0; i < terms; i++ )); do
    restart TERM
    [ "$i" -eq 0 ] && readopt
done
for (( i = 0; i < kills; i++ )); do restart KILL; done
touch $W/stop
wait "$writer"

# The keeper replaced every connection after each restart, and is idle
# now: no handshakes in a loop (the kernel answers success to a
# reconfigure with nothing to replace, so only the keeper's own count
# of dead connections stops it).
keeper=$(cat $W/nbd0.keeper.pid)
cpu () { awk '{ print $14 + $15 }' "/proc/$keeper/stat"; }
c0=$(cpu); sleep 2; c1=$(cpu)
[ $(( c1 - c0 )) -le 10 ] || fail "the keeper used $(( c1 - c0 )) ticks in 2 s while idle"
reconnected=$(( $(dmesg | grep -c "nbd0: reconnected socket") - reconn0 ))
echo "sockets handed to the device: $reconnected ($conns a restart)" | tee -a "$out.result"
[ "$reconnected" -ge $(( conns * (terms + kills) )) ] ||
    fail "$reconnected sockets reconnected, $(( conns * (terms + kills) )) expected"

# Each restart: the stop's and the start's times, and the longest
# write+fsync that began from 1 s before it to 3 s after.
bad_stop=0
for r in "${RESTARTS[@]}"; do
    read -r how at stop start <<< "$r"
    pause=$(restart_writer pause $W $(( at - 1000 )) $(( at + 3000 )))
    echo "restart by $how: stop $stop ms, start $start ms, longest write+fsync $pause ms" |
        tee -a "$out.result"
    [ "$how" = KILL ] || [ "$stop" -le $(( STOP_MS + 1000 )) ] || bad_stop=1
done
# p50 and p99 (nearest rank) of a column of numbers on stdin.
pct () { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "p50 %d ms, p99 %d ms", v[int((NR + 1) / 2)], v[int((NR * 99 + 99) / 100)] }'; }
for how in TERM KILL; do
    grep "restart by $how" "$out.result" | sed 's/.*stop \([0-9]*\) ms.*/\1/' > $W/stops
    grep "restart by $how" "$out.result" | sed 's/.*write+fsync \([0-9]*\) ms.*/\1/' > $W/pauses
    [ -s $W/stops ] || continue
    echo "$how ($(wc -l < $W/stops)): stop $(pct < $W/stops); pause $(pct < $W/pauses)" |
        tee -a "$out.result"
done
restart_writer errors $W | tee -a "$out.result"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "the writer saw errors"
[ "$bad_stop" -eq 0 ] || fail "a SIGTERM stop took more than $(( STOP_MS + 1000 )) ms"
dmesg > "$out.dmesg"
ioerr=$(( $(grep -c "I/O error, dev nbd0" "$out.dmesg") - ioerr0 ))
[ "$ioerr" -eq 0 ] || fail "the kernel logged $ioerr I/O errors on nbd0"

umount /mnt/rk || fail "umount failed"
"${fsck[@]}" /dev/nbd0 > $W/fsck.log 2>&1 || fail "${fsck[*]}: $(tail -5 $W/fsck.log)"
mount /dev/nbd0 /mnt/rk || fail "mount again failed"
restart_writer verify /mnt/rk $W |
    tee -a "$out.result"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "files lost or damaged"
umount /mnt/rk
"$DISCARDCTL" detach /dev/nbd0 || fail "discardctl detach failed"
keeper=$(pgrep -f "discardctl attach $W/dc.sock" || true)
[ -z "$keeper" ] || fail "the keeper is still running after detach (pid $keeper)"
echo "restart-keeper $fs: ok" | tee -a "$out.result"
