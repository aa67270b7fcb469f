#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: one flush for the journal and the backend (invariant
# 10; design notes, "One flush for the journal and the backend").  With
# the backing file and state= on the same ext4 or XFS file system, a
# FLUSH writes the journal's records to the device and the backend's
# fdatasync makes both durable: no fdatasync of the journal's own
# (journal_syncs stays 0, journal_shared_flush is true), and a FUA
# write is sent without FUA and followed by that one flush.  With state= on
# another file system the journal syncs itself at each FLUSH.  Either
# way a kill -9 after the FLUSHes loses no record: after the restart the
# pending set is the whole disk less the blocks written.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires_loop
requires mkfs.ext4 -V
requires mkfs.xfs -V
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --version

mktempdir
FLUSHES=40
SIZE=$(( 64 * 1024 * 1024 ))

# case NAME DIR BACKEND STATE SHARED: a whole-disk TRIM, then FLUSHES
# 4 KiB writes into the pending range, by turns followed by a FLUSH and
# sent with FUA; checks how the journal was synced, then kill -9, a
# restart, and the pending set.
case_run ()
{
    local name=$1 dir=$2 backend=$3 state=$4 shared=$5 syncs pending
    mkdir -p "$dir"
    truncate -s "$SIZE" "$backend"
    start_nbdkit -P "$dir/pid" -U "$dir/sock" "$PLUGIN" backend="$backend" \
        state="$state" delay=1h ctl="$dir/ctl"
    wait_for_ctl "$dir/ctl"
    /usr/bin/python3 - "$dir/sock" "$FLUSHES" <<'PY' || fail "$name: the client failed"
import nbd, sys
h = nbd.NBD(); h.connect_unix(sys.argv[1])
h.trim(h.get_size(), 0); h.flush()
for i in range(int(sys.argv[2])):
    if i % 2:
        h.pwrite(b"x" * 4096, i * 65536, nbd.CMD_FLAG_FUA)
    else:
        h.pwrite(b"x" * 4096, i * 65536); h.flush()
PY
    [ "$(ctl_stat "$dir/ctl" journal_shared_flush)" = "$shared" ] ||
        fail "$name: journal_shared_flush is not $shared"
    syncs=$(ctl_stat "$dir/ctl" journal_syncs)
    if [ "$shared" = true ]; then
        [ "$syncs" -eq 0 ] || fail "$name: $syncs fdatasyncs of the journal, not 0"
    else
        [ "$syncs" -ge "$FLUSHES" ] || fail "$name: $syncs fdatasyncs of the journal, not $FLUSHES+"
    fi
    kill -KILL "$NBDKIT_PID"
    await_exit "$NBDKIT_PID" nbdkit SIGKILL || true
    start_nbdkit -P "$dir/pid2" -U "$dir/sock2" "$PLUGIN" backend="$backend" \
        state="$state" delay=1h ctl="$dir/ctl2"
    wait_for_ctl "$dir/ctl2"
    pending=$(ctl_stat "$dir/ctl2" pending_bytes)
    [ "$pending" -eq $(( SIZE - FLUSHES * 4096 )) ] ||
        fail "$name: $pending bytes pending after kill -9 and a restart, not $(( SIZE - FLUSHES * 4096 ))"
    stop_pidfile "$dir/pid2" nbdkit
    echo "$name: journal_shared_flush $shared, $syncs journal fdatasyncs, $pending bytes pending after kill -9"
}

for fs in ext4 xfs; do
    img=$TESTDIR/$fs.img mnt=$TESTDIR/$fs
    truncate -s 512M "$img"
    case $fs in
    ext4) mkfs.ext4 -q -F "$img" ;;
    xfs) mkfs.xfs -q -f "$img" ;;
    esac || fail "mkfs.$fs failed"
    mkdir -p "$mnt"
    mount -o loop "$img" "$mnt" || fail "mount of the $fs image failed"
    cleanup_fn umount_if_mounted "$mnt"
    case_run "$fs, same file system" "$TESTDIR/$fs-same" \
        "$mnt/disk.img" "$mnt/state" true
    case_run "$fs, state= elsewhere" "$TESTDIR/$fs-apart" \
        "$mnt/disk2.img" "$TESTDIR/$fs-apart.state" false
done
echo "shared flush: ok"
