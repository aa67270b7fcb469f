#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the guest (tests/guest/run): restarts under a mounted
# filesystem through the keeper (issue 37).  discardcache on a file, the
# device attached with `discardctl attach --connections=CONNECTIONS`,
# XFS (or ext4) mounted with -o discard, a writer that fsyncs files
# without a pause (restart-writer.py); then TERMS restarts by SIGTERM
# and KILLS by kill -9, each new server started on the same socket with
# the same state=; after the first, the keeper is killed and
# `attach --adopt` takes the device over.  After each restart, once the
# writer has finished PROGRESS write+fsync through the new server, the
# server forwards every pending discard (discardctl flush) and the
# writer reads back every file it keeps from the device (O_DIRECT): a
# discard replayed over an acknowledged write would show as zeros.
# After the last, a control: zeros written over one file's blocks in
# the backend must be found.  Checked: the writer saw no error, nor did
# the kernel; each SIGTERM stop ended within stop-timeout= + 1 s and
# exited 0; every connection was handed back after each restart and
# the keeper is idle after; after a clean unmount xfs_repair -n
# (e2fsck -fn) is clean and every file the writer kept is intact.
# Printed: each stop's and start's time, the longest write+fsync around
# each restart (the pause it caused) and its ratio to stop + start;
# their p50 and p99.
#
#   restart-keeper.sh [TERMS [CONNECTIONS [xfs|ext4 [KILLS]]]]
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"

terms=${1:-3} conns=${2:-2} fs=${3:-xfs} kills=${4:-1}
STOP_MS=2000
# Write+fsync the writer must finish through each new server before the
# next restart: what ties a restart's spacing to what was exercised
# rather than to a clock (a fixed 3 s was time lost on a fast guest and
# no promise on a slow one).
PROGRESS=20
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

# nbdkit will not bind over a socket left behind (a kill -9 leaves it;
# a SIGTERM stop removes it).  A kill -9 leaves the control socket too: gone first, so that waiting
# for it (check_files) waits for the new server's, created after
# nbdkit's socket.
server ()
{
    rm -f $W/dc.sock $W/dc.ctl
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
    [ -n "${writer:-}" ] && stop_pid "$writer" restart-writer.py
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
/usr/bin/python3 "$abs_top_srcdir/tests/guest/restart-writer.py" write /mnt/rk $W $W/stop \
    $W/disk.img &
writer=$!

# wait_writer SECONDS TEST...: until TEST succeeds; fail if the writer
# exits first or SECONDS pass (120 s below: a request that a kill -9
# left unanswered waits for the kernel's 30 s timeout).
wait_writer () { wait_started "$writer" restart-writer.py "$@"; }
ops_done () { [ -e $W/latency ] && [ "$(wc -l < $W/latency)" -ge "$1" ]; }
# The kept set full, so every file written also deletes one.
wait_writer 120 ops_done $(( 60 + PROGRESS ))

# check_files verify|control: every discard the server holds (taken
# over from state= or the journal) forwarded to the backend, then every
# file the writer keeps read back (restart-writer.py says how).  Sets
# CHECK to the writer's answer.
CHECKS=0 CHECKED=0
check_files ()
{
    wait_started "$SERVER" nbdkit 30 test -S $W/dc.ctl
    "$DISCARDCTL" -s $W/dc.ctl flush --wait > /dev/null || fail "discardctl flush failed"
    rm -f $W/check.out
    echo "$1" > $W/check.new && mv $W/check.new $W/check.req
    wait_writer 120 test -e $W/check.out
    CHECK=$(cat $W/check.out)
}

# restart HOW: stop the server (TERM or KILL), start the next one, let
# the writer work through it, and check every file it keeps.
RESTARTS=$W/restarts
: > $RESTARTS
restart ()
{
    local t0 t1 t2 t3 n n0 status
    t0=$(date +%s%N)
    kill -"$1" "$SERVER"
    # Quiet: bash would report the kill -9 as a job "Killed".
    { wait "$SERVER"; } 2>/dev/null
    status=$?
    t1=$(date +%s%N)
    # A stop that crashes may not have saved state=, and a service
    # manager counts it failed.
    [ "$1" = KILL ] || [ "$status" -eq 0 ] ||
        fail "the server stopped by SIGTERM exited $status: $(tail -5 "$GUEST_OUT/nbdkit.log")"
    server
    t2=$(date +%s%N)
    # +1: the write+fsync in flight at the start began before it.
    n0=$(wc -l < $W/latency)
    wait_writer 120 ops_done $(( n0 + PROGRESS + 1 ))
    check_files verify
    t3=$(date +%s%N)
    n=$(sed -n 's/^checked \([0-9]*\) files, 0 bad$/\1/p' <<< "$CHECK")
    [ -n "$n" ] && ! grep -q "^bad" <<< "$CHECK" ||
        fail "after a restart by $1, files read back wrong: $CHECK"
    CHECKS=$(( CHECKS + 1 )) CHECKED=$(( CHECKED + n ))
    # The signal, the stop's and the start's times, the check's end.
    echo "$1 $(( t0 / 1000000 )) $(( (t1 - t0) / 1000000 )) $(( (t2 - t1) / 1000000 ))" \
        "$(( t3 / 1000000 ))" >> $RESTARTS
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
for (( i = 0; i < terms; i++ )); do
    restart TERM
    [ "$i" -eq 0 ] && readopt
done
for (( i = 0; i < kills; i++ )); do restart KILL; done
echo "content checked after each of $CHECKS restarts: $CHECKED files read back, 0 bad" |
    tee -a "$out.result"
# The control: the check sees zeros on the device, or it proves nothing.
check_files control
zeroed=$(sed -n 's/^zeroed \(f[0-9]*\) \([0-9]*\)$/\1/p' <<< "$CHECK")
[ -n "$zeroed" ] && [ "$(grep "^bad" <<< "$CHECK")" = "bad $zeroed" ] &&
    grep -q ", 1 bad$" <<< "$CHECK" ||
    fail "control: zeros over one file's blocks were not found as exactly that file: $CHECK"
echo "control: zeros written over $zeroed's blocks in the backend were found" |
    tee -a "$out.result"
touch $W/stop
wait "$writer"
writer=

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
# write+fsync that began from 1 s before the signal (but not before the
# previous restart's check ended: restarts follow each other closer than
# that) to the end of the check after it: the pause it caused, also as a
# ratio to stop + start (under TCG only ratios mean anything).
bad_stop=0 prev=0
: > $W/measured
while read -r how at stop start end; do
    from=$(( at - 1000 > prev ? at - 1000 : prev ))
    pause=$(awk -v a="$from" -v e="$end" '$1 * 1000 >= a && $1 * 1000 <= e && $2 > m { m = $2 }
                                         END { printf "%d", m * 1000 }' $W/latency)
    prev=$end
    ratio=$(awk -v p="$pause" -v s=$(( stop + start )) 'BEGIN { printf "%.2f", p / (s ? s : 1) }')
    echo "restart by $how: stop $stop ms, start $start ms, pause $pause ms," \
        "pause / (stop + start) $ratio" | tee -a "$out.result"
    echo "$how $stop $start $pause $ratio" >> $W/measured
    [ "$how" = KILL ] || [ "$stop" -le $(( STOP_MS + 1000 )) ] || bad_stop=1
done < $RESTARTS
# p50 and p99 (nearest rank) of column COL of HOW's rows of measured.
pct ()
{
    awk -v h="$1" -v c="$2" '$1 == h { print $c }' $W/measured | sort -g |
        awk '{ v[NR] = $1 } END { printf "p50 %s, p99 %s", v[int((NR + 1) / 2)], v[int((NR * 99 + 99) / 100)] }'
}
for how in TERM KILL; do
    n=$(awk -v h="$how" '$1 == h' $W/measured | wc -l)
    [ "$n" -gt 0 ] || continue
    echo "$how ($n): stop $(pct "$how" 2) ms; start $(pct "$how" 3) ms;" \
        "pause $(pct "$how" 4) ms; pause / (stop + start) $(pct "$how" 5)" |
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
