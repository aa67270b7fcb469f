#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the journal's shared flush survives a power cut (issue
# 24, invariant 10; design notes, "One flush for the journal and the
# backend").  With the backing file and state= on one ext4 or XFS file
# system, a FLUSH only writes the journal's records to the device and
# counts on the backend's fdatasync, which ends with a flush of the
# device's cache, to make them durable.  kill -9 (test-journal-crash.sh)
# cannot test that: the page cache and the device keep everything.  Here
# the device has a volatile write cache that loses power:
#
#   IMG (tmpfs) <- nbdkit --filter=cache file IMG cache=writeback
#     <- nbdfuse <- loop <- ext4 | XFS <- backing file, state=, journal
#     <- nbdkit discardcache <- journal-crash.py (libnbd)
#
# nbdkit's cache filter in writeback mode keeps writes in its own
# temporary file until a FLUSH writes them to IMG, so kill -9 of that
# nbdkit loses exactly what a volatile cache loses.  Checked here
# (nbdkit 1.32.5): a write then a FLUSH, then a write and a trim without
# one, then kill -9: IMG held the flushed write, neither unflushed
# change, and a FUA write.
#
# Each round brings the device up on the same IMG (the file system
# replays its own log at mount), starts discardcache (it replays its
# journal), and journal-crash.py checks the replay against its model,
# runs random writes, trims, zeroes and FLUSHes, and kills the device's
# nbdkit and discardcache back to back with SIGKILL, sometimes with a
# FLUSH in flight.  What must hold is what holds after kill -9, except
# that a block known clean at the last FLUSH may come back pending or,
# if written since, still clean (journal-crash.py says why).
#
# Environment: POWERCUT_ROUNDS=N per file system (default 25),
# POWERCUT_SEED=N (printed), POWERCUT_FS="ext4 xfs".
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/e2e-lib.sh"
requires_root
requires_fuse
requires_loop
requires nbdfuse --version
requires mkfs.ext4 -V
requires mkfs.xfs -V
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --version
requires "$NBDKIT" -U - --filter=cache null --run true
ulimit -c 0                             # nbdfuse's aborts (below)

: "${POWERCUT_ROUNDS:=25}"
: "${POWERCUT_SEED:=$(( $(date +%s) % 100000 ))}"
: "${POWERCUT_FS:=ext4 xfs}"
export JOURNAL_CRASH_SEED=$POWERCUT_SEED
fast_scratch_setup
echo "journal power cut: $POWERCUT_ROUNDS rounds on each of $POWERCUT_FS, seed $POWERCUT_SEED"

BLOCKS=8192                             # the backing file: 32 MiB

# device_up: the device over IMG (its sockets in DEVDIR), nbdfuse and a
# loop device.  Sets DEVICE_PID and DEV.  Every round uses the same
# DEVDIR: the loop device's backing file (DEVDIR/fuse/disk) is what a
# state file on the file system is tied to (backend/stable-id.c).
device_up ()
{
    local d=$DEVDIR
    mkdir -p "$d/fuse"
    rm -f "$d/dev.sock" "$d/dev.pid"
    # cache-min-block-size=4k: a FLUSH writes dirty 4 KiB blocks back in
    # the order of their offsets, not of their writes, so a cut during
    # one leaves a reordered part of them, as a disk's cache might.
    TMPDIR=$FASTDIR start_nbdkit -P "$d/dev.pid" -U "$d/dev.sock" --filter=cache \
        file "$IMG" cache=writeback cache-min-block-size=4k
    DEVICE_PID=$NBDKIT_PID
    E2E_DIR=$d
    # nbdfuse 1.14 aborts (an assertion in completion_callback) when its
    # server dies with requests in flight: its messages go to a log, and
    # disowned, its death is not reported ("Aborted") by bash.
    e2e_nbdfuse "$d" "$d/dev.sock" 2>>"$d/nbdfuse.log"
    disown "$E2E_NBDFUSE_PID"
    # Always the same loop device too, which tests need not rely on.
    attach_loop "$d/fuse/disk" "$LOOP_OWN" ||
        fail "losetup $LOOP_OWN $d/fuse/disk failed (taken by another test?)"
    DEV=$LOOP_DEV
}

mount_fs ()
{
    mount "$DEV" "$MNT" || fail "mount of $fs on $DEV failed"
    cleanup_fn unmount_fs
}

# unmount_fs: also for a file system whose device has died (lazily if
# need be: nothing could be written back anyway).
unmount_fs ()
{
    umount_if_mounted "$MNT" 2>/dev/null
    ! is_mounted "$MNT" || umount -l "$MNT"
}

# device_down: unmount and take the device down in order.  After a cut
# the loop device is released only when the dead file system has been
# shut down: the next mount of the same file system waits for that (XFS
# refuses a second one with the same UUID).
device_down ()
{
    unmount_fs
    detach_loop "$DEV" || fail "$DEV still attached 10 s after losetup -d"
    fusermount3 -u -z "$E2E_DIR/fuse" 2>/dev/null
    e2e_stop_nbdfuse
    stop_pid "$DEVICE_PID" "nbdkit (cache filter)"
}

# fs_make: a new IMG with the file system and the 32 MiB sparse backing
# file, unmounted cleanly (so made durable).
fs_make ()
{
    rm -f "$IMG" "$MODEL"
    truncate -s 512M "$IMG"
    device_up
    case $fs in
    # No lazy init: its background writes would run through the rounds.
    ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$DEV" ;;
    xfs) mkfs.xfs -q -f -K "$DEV" ;;
    esac || fail "mkfs.$fs failed"
    mount_fs
    truncate -s $(( BLOCKS * 4096 )) "$MNT/disk.img"
    device_down
}

# cut_round ROUND: device up, discardcache up, journal-crash.py (which
# cuts the power), then the dead stack down.
cut_round ()
{
    local round=$1 d=$TESTDIR/$fs/r$1 pid status
    mkdir -p "$d"
    device_up
    mount_fs
    start_nbdkit -P "$d/pid" -U "$d/disk.sock" "$PLUGIN" backend="$MNT/disk.img" \
        state="$MNT/state" ctl="$d/ctl" delay=1h granularity=4k 2>>"$d/log"
    pid=$NBDKIT_PID
    wait_for_ctl "$d/ctl"
    # The test is about the shared flush: it must be the one running.
    [ "$(ctl_stat "$d/ctl" journal_shared_flush)" = true ] ||
        fail "$fs: journal_shared_flush is not true"
    # Quiet: bash reports the processes the script kills ("Killed").
    {
        /usr/bin/python3 "$abs_top_srcdir/tests/e2e/journal-crash.py" \
            "$d/disk.sock" "$d/ctl" "$DISCARDCTL" "$MODEL" "$round" "$BLOCKS" \
            "$pid" "$DEVICE_PID" > "$d/out" 2>&1
        status=$?
        [ "$status" -ne 0 ] || wait "$pid" "$DEVICE_PID"
    } 2>/dev/null
    if [ "$status" -ne 0 ]; then
        cat "$d/out" "$d/log" >&2
        fail "$fs round $round (seed $POWERCUT_SEED)"
    fi
    _stopped_pids[$pid]=1                 # killed by the script: never again
    _stopped_pids[$DEVICE_PID]=1
    device_down
    (( round % 5 && round > 3 )) || echo "$fs $(tail -1 "$d/out")"
    tally "$(tail -1 "$d/out")"
    rm -rf "$d"
}

# tally LINE: what the replays showed, from journal-crash.py's last line.
tally ()
{
    local n
    case $1 in *"at the FLUSH in flight"*) (( at_inflight++ )) ;; esac
    # The last round's cut is not checked: not counted.
    case $1 in
    *"a FLUSH in flight at"*) [ "$round" -gt "$POWERCUT_ROUNDS" ] || (( inflight++ )) ;;
    esac
    n=$(sed -n 's/.* \([0-9]*\) written since came back clean.*/\1/p' <<< "$1")
    (( kept += ${n:-0} ))
    n=$(sed -n 's/.* \([0-9]*\) not written since came back pending.*/\1/p' <<< "$1")
    (( unpunched += ${n:-0} ))
}

loop_create || fail "no loop device of the test's own (LOOP_CTL_ADD failed)"
start=$SECONDS
for fs in $POWERCUT_FS; do
    IMG=$FASTDIR/$fs.img MNT=$TESTDIR/$fs/mnt MODEL=$TESTDIR/$fs.model
    DEVDIR=$TESTDIR/$fs/dev
    mkdir -p "$MNT"
    fs_make
    inflight=0 at_inflight=0 kept=0 unpunched=0
    # One round more than cuts to check: each round checks the last.
    for (( round = 1; round <= POWERCUT_ROUNDS + 1; round++ )); do
        cut_round "$round"
    done
    echo "$fs: $inflight cuts with a FLUSH in flight, $at_inflight replays" \
         "of its sets; blocks known clean at the FLUSH: $kept written since" \
         "came back clean, $unpunched not written since came back pending"
done
echo "journal power cut: ok, $POWERCUT_ROUNDS cuts on each of $POWERCUT_FS in $(( SECONDS - start )) s (seed $POWERCUT_SEED)"
