# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the end-to-end stack, shared by the XFS tests and the
# README's main job: sparse file -> front-end -> loop -> mkfs.xfs ->
# mount -o discard.  The front-end is $E2E_FRONTEND:
#   nbdkit  nbdkit discardcache, reached through nbdfuse (the default)
#   fuse    discardfuse
# Both show the image as $E2E_DIR/fuse/disk and write their statistics
# to $E2E_DIR/stats.json when they stop.  Every piece registers its own
# teardown (umount, losetup -d, fusermount3 -u, kill by pid) with
# cleanup_fn, so it all comes down even when a step fails.
# Source tests/functions.sh first.

: "${E2E_FRONTEND:=nbdkit}"

# e2e_requires: skip unless this front-end's stack can run here.
e2e_requires ()
{
    requires_root
    requires_fuse
    requires_loop
    requires mkfs.xfs -V
    requires fstrim --version
    case "$E2E_FRONTEND" in
    nbdkit)
        requires "$NBDKIT" --version
        requires nbdfuse --version ;;
    fuse)
        [ -x "$DISCARDFUSE" ] || fail "$DISCARDFUSE is missing: build first (make)" ;;
    *)
        fail "E2E_FRONTEND=$E2E_FRONTEND: expected nbdkit or fuse" ;;
    esac
}

# e2e_start DIR SIZE [ENGINE KEYS...]: sets E2E_DEV and E2E_FS.
e2e_start ()
{
    local dir=$1 size=$2
    shift 2
    E2E_DIR=$dir
    truncate -s "$size" "$dir/backing"
    mkdir -p "$dir/fuse" "$dir/fs"
    case "$E2E_FRONTEND" in
    nbdkit)
        start_nbdkit -P "$dir/nbdkit.pid" -U "$dir/nbd.sock" "$PLUGIN" \
            backend="$dir/backing" statsfile="$dir/stats.json" "$@"
        e2e_nbdfuse "$dir" "$dir/nbd.sock" ;;
    fuse) e2e_start_discardfuse "$dir" "$@" ;;
    esac
    e2e_mkfs_mount "$dir" discard
}

# e2e_attach DIR SOCKET [MOUNT_OPTIONS]: the client half of the stack over
# any NBD server on SOCKET: nbdfuse DIR/fuse/disk, then e2e_mkfs_mount.
# Sets E2E_DEV and E2E_FS; e2e_detach takes it down while the server keeps
# running.  A script may attach and detach many times.
e2e_attach ()
{
    E2E_DIR=$1
    mkdir -p "$1/fuse" "$1/fs"
    e2e_nbdfuse "$1" "$2"
    e2e_mkfs_mount "$1" "${3:-}"
}

# e2e_nbdfuse DIR SOCKET: nbdfuse shows the NBD server as DIR/fuse/disk.
e2e_nbdfuse ()
{
    nbdfuse "$1/fuse/disk" --unix "$2" &
    E2E_NBDFUSE_PID=$!
    cleanup_fn e2e_stop_nbdfuse
    wait_started "$E2E_NBDFUSE_PID" nbdfuse 30 test -e "$1/fuse/disk"
}

# e2e_mkfs_mount DIR [MOUNT_OPTIONS]: losetup DIR/fuse/disk, mkfs.xfs
# $E2E_MKFS_OPTS, mount (with MOUNT_OPTIONS, e.g. "discard") on DIR/fs.
e2e_mkfs_mount ()
{
    local dir=$1 opts=${2:-}
    attach_loop "$dir/fuse/disk" || fail "losetup on $dir/fuse/disk failed"
    E2E_DEV=$LOOP_DEV
    # shellcheck disable=SC2086
    mkfs.xfs -q ${E2E_MKFS_OPTS:-} "$E2E_DEV" || fail "mkfs.xfs failed"
    E2E_FS=$dir/fs
    mount ${opts:+-o "$opts"} "$E2E_DEV" "$E2E_FS" || fail "mount ${opts:+-o $opts} failed"
    cleanup_fn umount_if_mounted "$dir/fs"
}

e2e_start_discardfuse ()
{
    local dir=$1
    shift
    start_discardfuse "$dir/fuse" backend="$dir/backing" \
        statsfile="$dir/stats.json" "$@"
    E2E_DISCARDFUSE_PID=$DISCARDFUSE_PID
}

# e2e_live_stats: a file with the statistics now, or nothing if the
# front-end has none while it runs.
e2e_live_stats ()
{
    [ "$E2E_FRONTEND" = fuse ] && echo "$E2E_DIR/fuse/stats"
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
    umount_if_mounted "$E2E_FS"
    detach_loop "$E2E_DEV"
    e2e_stop_nbdfuse
}

# e2e_teardown: everything down in order, the engine last (it forwards
# what is pending and writes its statistics at exit).
e2e_teardown ()
{
    case "$E2E_FRONTEND" in
    nbdkit)
        e2e_detach
        stop_pidfile "$E2E_DIR/nbdkit.pid" nbdkit ;;
    fuse)
        umount_if_mounted "$E2E_FS"
        detach_loop "$E2E_DEV"
        stop_discardfuse "$E2E_DIR/fuse" "$E2E_DISCARDFUSE_PID" ||
            fail "discardfuse exited with status $?" ;;
    esac
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

# e2e_print_stats FILE: the statistics a person reads (discardctl's
# table of a statsfile=).
e2e_print_stats ()
{
    "$DISCARDCTL" stats --file="$1" || fail "discardctl stats --file=$1 failed"
}
