#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: one flush for the journal and the backend (invariant
# 10; design notes, "One flush for the journal and the backend").  With
# the backing file and state= on the same ext4 or XFS file system, a
# FLUSH writes the journal's records to the device and the backend's
# fdatasync makes both durable: no fdatasync of the journal's own
# (journal_syncs stays 0, journal_shared_flush is true), and a FUA
# write is sent without FUA and followed by that one flush.  With state= on
# another file system the journal syncs itself at each FLUSH.  Then
# KICKED writes without a FLUSH pass the journal's buffer bound at least
# twice: sharing the flush, the journal writes those records out
# without an fdatasync (journal_syncs still 0; commits up by 3 or more,
# two for the bound and one for the FLUSH after them) and that FLUSH
# makes them durable.  Either way a kill -9 after the last
# FLUSH loses no record: after the restart the pending set is the whole
# disk less the blocks written.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires_loop
requires mkfs.ext4 -V
requires mkfs.xfs -V
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --version

mktempdir
FLUSHES=40
# Four times BUFFER_KICK (1,024 records) and more: two commits for the
# bound even if the journal's thread takes its first one late.
KICKED=4200
SIZE=$(( 64 * 1024 * 1024 ))

# write_kicked SOCKET: KICKED 4 KiB writes from 4 MiB on, each into
# the pending range (a record each), then one FLUSH.
write_kicked ()
{
    /usr/bin/python3 - "$1" "$KICKED" <<'PY'
import nbd, sys
h = nbd.NBD(); h.connect_unix(sys.argv[1])
for i in range(int(sys.argv[2])):
    h.pwrite(b"k" * 4096, (4 << 20) + i * 4096)
h.flush()
PY
}

# case NAME DIR BACKEND STATE SHARED: a whole-disk TRIM, then FLUSHES
# 4 KiB writes into the pending range, by turns followed by a FLUSH and
# sent with FUA; checks how the journal was synced; then the KICKED
# writes and their FLUSH, the same check, kill -9, a restart, and the
# pending set.
case_run ()
{
    local name=$1 dir=$2 backend=$3 state=$4 shared=$5 syncs commits pending
    local written=$(( (FLUSHES + KICKED) * 4096 ))
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
    commits=$(ctl_stat "$dir/ctl" journal_commits)
    write_kicked "$dir/sock" || fail "$name: the kicked writes failed"
    commits=$(( $(ctl_stat "$dir/ctl" journal_commits) - commits ))
    [ "$commits" -ge 3 ] ||
        fail "$name: $commits journal commits for $KICKED writes and a FLUSH, not 3+"
    if [ "$shared" = true ]; then
        syncs=$(ctl_stat "$dir/ctl" journal_syncs)
        [ "$syncs" -eq 0 ] ||
            fail "$name: $syncs fdatasyncs of the journal after $KICKED writes without a FLUSH, not 0"
    fi
    kill -KILL "$NBDKIT_PID"
    await_exit "$NBDKIT_PID" nbdkit SIGKILL || true
    start_nbdkit -P "$dir/pid2" -U "$dir/sock2" "$PLUGIN" backend="$backend" \
        state="$state" delay=1h ctl="$dir/ctl2"
    wait_for_ctl "$dir/ctl2"
    pending=$(ctl_stat "$dir/ctl2" pending_bytes)
    [ "$pending" -eq $(( SIZE - written )) ] ||
        fail "$name: $pending bytes pending after kill -9 and a restart, not $(( SIZE - written ))"
    stop_pidfile "$dir/pid2" nbdkit
    echo "$name: journal_shared_flush $shared, $syncs journal fdatasyncs, $commits commits for the kicked writes, $pending bytes pending after kill -9"
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
