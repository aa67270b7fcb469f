# discardcache: the end-to-end stack, shared by the XFS test and the
# README's main job: sparse file -> nbdkit discardcache -> nbdfuse ->
# losetup -> mkfs.xfs -> mount -o discard.  Every piece registers its own
# teardown (umount, losetup -d, fusermount3 -u, kill by pid) with
# cleanup_fn, so it all comes down even when a step fails.
# Source tests/functions.sh first.

# e2e_start DIR SIZE [PLUGIN KEYS...]: discardcache on DIR/backing (SIZE)
# with the stack over it, mounted -o discard; sets E2E_DEV and E2E_FS.
e2e_start ()
{
    local dir=$1 size=$2
    shift 2
    truncate -s "$size" "$dir/backing"
    start_nbdkit -P "$dir/nbdkit.pid" -U "$dir/nbd.sock" "$PLUGIN" \
        backend="$dir/backing" statsfile="$dir/stats.json" "$@"
    e2e_attach "$dir" "$dir/nbd.sock" discard
}

# e2e_attach DIR SOCKET [MOUNT_OPTIONS]: the client half of the stack over
# any NBD server on SOCKET: nbdfuse DIR/fuse/disk, losetup, mkfs.xfs
# $E2E_MKFS_OPTS, mount (with MOUNT_OPTIONS, e.g. "discard") on DIR/fs.
# Sets E2E_DEV and E2E_FS.  Undo with e2e_detach; its hooks also run at
# exit, and only undo what is still set up, so a script may attach and
# detach many times.
e2e_attach ()
{
    local dir=$1 sock=$2 opts=${3:-} i
    E2E_DIR=$dir
    mkdir -p "$dir/fuse" "$dir/fs"
    if [ -z "${_e2e_hooks:-}" ]; then
        _e2e_hooks=1
        cleanup_fn e2e_stop_nbdfuse
        cleanup_fn e2e_detach_loop
        cleanup_fn e2e_umount
    fi

    nbdfuse "$dir/fuse/disk" --unix "$sock" &
    E2E_NBDFUSE_PID=$!
    for (( i = 0; i < 300; i++ )); do
        [ -e "$dir/fuse/disk" ] && break
        kill -0 "$E2E_NBDFUSE_PID" 2>/dev/null || fail "nbdfuse exited at start"
        sleep 0.1
    done
    [ -e "$dir/fuse/disk" ] || fail "nbdfuse did not show $dir/fuse/disk"

    E2E_DEV=$(losetup --direct-io=on -f --show "$dir/fuse/disk") ||
        fail "losetup on $dir/fuse/disk failed"
    # shellcheck disable=SC2086
    mkfs.xfs -q ${E2E_MKFS_OPTS:-} "$E2E_DEV" || fail "mkfs.xfs failed"
    E2E_FS=$dir/fs
    mount ${opts:+-o "$opts"} "$E2E_DEV" "$E2E_FS" || fail "mount ${opts:+-o $opts} failed"
}

e2e_umount ()
{
    [ -n "${E2E_FS:-}" ] && mountpoint -q "$E2E_FS" && umount "$E2E_FS"
    return 0
}

# e2e_detach_loop: detach E2E_DEV, once (the number may be reused by
# someone else's loop device afterwards).
e2e_detach_loop ()
{
    local i
    [ -n "${E2E_DEV:-}" ] || return 0
    losetup -d "$E2E_DEV" 2>/dev/null
    E2E_DEV=
    # Detaching is asynchronous; FUSE cannot unmount while loop holds it.
    for (( i = 0; i < 100; i++ )); do
        [ -z "$(losetup -j "$E2E_DIR/fuse/disk" 2>/dev/null)" ] && return 0
        sleep 0.1
    done
}

e2e_stop_nbdfuse ()
{
    local i
    [ -n "${E2E_NBDFUSE_PID:-}" ] || return 0
    fusermount3 -u "$E2E_DIR/fuse" 2>/dev/null
    for (( i = 0; i < 100; i++ )); do
        kill -0 "$E2E_NBDFUSE_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$E2E_NBDFUSE_PID" 2>/dev/null && kill -TERM "$E2E_NBDFUSE_PID"
    wait "$E2E_NBDFUSE_PID" 2>/dev/null
    E2E_NBDFUSE_PID=
}

# e2e_detach: the client half down (umount, loop, nbdfuse); the server
# keeps running.
e2e_detach ()
{
    e2e_umount
    e2e_detach_loop
    e2e_stop_nbdfuse
}

# e2e_teardown: everything down in order, nbdkit last (it forwards what
# is pending and writes its statistics at exit).
e2e_teardown ()
{
    e2e_detach
    stop_pidfile "$E2E_DIR/nbdkit.pid" nbdkit
}

# e2e_allocated FILE: bytes the file occupies on disk.
e2e_allocated ()
{
    echo $(( $(stat -c %b "$1") * $(stat -c %B "$1") ))
}

# e2e_fs_used DIR: bytes the filesystem says it uses.
e2e_fs_used ()
{
    df -B1 --output=used "$1" | tail -n 1 | tr -d ' '
}

# e2e_print_stats FILE: the statistics a person reads.
e2e_print_stats ()
{
    /usr/bin/python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
mib = lambda n: "%.1f MiB" % (n / 1048576)
pct = lambda a, b: "%.0f%%" % (100.0 * a / b) if b else "n/a"
print("discardcache statistics")
print("  trims received        %8d  (%s)" % (s["trims"], mib(s["trim_bytes"])))
print("  cancelled by writes   %8s  (%s of trimmed bytes)" % (mib(s["cancelled_by_writes"]), pct(s["cancelled_by_writes"], s["trim_bytes"])))
print("  cancelled by zeroes   %8s" % mib(s["cancelled_by_zeroes"]))
print("  merges                %8d" % s["merges"])
print("  discards forwarded    %8d  (%s; %s of trims received)" % (s["forwarded"], mib(s["forwarded_bytes"]), pct(s["forwarded"], s["trims"])))
print("  dropped               %8d  (%s)" % (s["dropped"], mib(s["dropped_bytes"])))
print("  still pending         %8d  (%s, sub-granule %s)" % (s["pending_extents"], mib(s["pending_bytes"]), mib(s["subgranule_bytes"])))
print("  forward errors        %8d" % s["forward_errors"])
print("  backend discard       %8s" % ("yes" if s["discard_supported"] else "NOT SUPPORTED"))
PY
}
