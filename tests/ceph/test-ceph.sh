#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the RBD backend on a real single-node Ceph cluster
# (tests/ceph/cluster), one cluster for the whole group:
#   setup    every bad set-up refused before serving, by both front-ends
#            (nbdkit and discardfuse started in the background), within a
#            bound, with a message naming the key; nothing left running
#   lock     the image's exclusive lock: a second discardcache refused;
#            an image qemu-nbd writes refused, and qemu-nbd keeps it
#   verify   the concurrent verifier, identity and thin, then a restart
#            checks every block
#   crash    kill -9 mid-churn, then a restart: every block as of the last
#            flush (the verifier's --verify-durable)
#   xfs      XFS -o discard through nbdfuse + loop and through discardfuse:
#            files, deletes, fstrim, a clean stop; the space comes back
#            (rbd du), the geometry is the image's, and every synced file
#            reads back intact after a restart
#   lowwater low-water= on a pool with a quota: pending discards (delay=1h)
#            reach the image once the pool's free space falls below the
#            mark, and the space comes back; without the key nothing
#            moves (nbdkit, and discardfuse)
#   outage   OSD stopped: a write fails with EIO within rbd-timeout= + 1 s,
#            stats answer in under 1 s, writes work again once it is back;
#            mon stopped: stats under 1 s, writes still work; a cluster
#            without pool statistics (mgr stopped) refuses low-water=
#   quota    a pool over its quota: a write that needs space fails with
#            ENOSPC within rbd-timeout=, an overwrite still works; the
#            pending discards are forwarded, without low-water=, and
#            writes fit again
#   takeover kill -9, then a restart with the same state= fences the dead
#            holder and serves within 10 s; a paused (SIGSTOP) holder
#            fenced so can write nothing after SIGCONT; a second server
#            is refused naming another discardcache
# The cluster delays each OSD reply up to 1 ms (tests/ceph/cluster).
# CEPH_CASES="setup lock ..." runs only some (default: all).
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/ceph/ceph-lib.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"
ceph_requires
requires_fuse
requires jq --version
requires qemu-nbd --version
requires nbdfuse --version
requires mkfs.xfs -V

: "${CEPH_CASES:=setup lock outage quota takeover verify crash xfs lowwater}"
: "${VERIFY_SCALE:=100}"
verify_setup
dir=$TESTDIR
mkdir -p "$dir/mnt"
ceph_start

# --- setup: refused before serving -------------------------------------

# leftovers WHAT: nothing of a failed start is left (but the servers
# in KEEP_PIDS, which hold what it was refused).
KEEP_PIDS=
leftovers ()
{
    local pids
    pids=$(pgrep -f -- "$dir/" || true)
    # The cluster's daemons run from $dir too: only ours count.
    pids=$(for p in $pids; do
               [[ " $KEEP_PIDS " = *" $p "* ]] && continue
               grep -qE 'nbdkit|discardfuse' "/proc/$p/comm" 2>/dev/null && echo "$p"
           done)
    if [ -n "$pids" ]; then
        ps -o pid,args -p $pids >&2
        for p in $pids; do kill -KILL "$p" 2>/dev/null; done
        fail "$1: processes left running"
    fi
    [ -z "${KEEP_MOUNT:-}" ] && grep -qF " $dir/mnt " /proc/mounts &&
        { fusermount3 -u -z "$dir/mnt"; fail "$1: left a mount"; }
    return 0
}

# refused FRONTEND "KEYS" PATTERN [SECONDS]: that front-end, started in
# the background with KEYS, exits non-zero within SECONDS (default 60)
# with PATTERN (grep -E) in its message, and leaves nothing behind.
refused ()
{
    local front=$1 keys=$2 pattern=$3 secs=${4:-60} status=0 t=$SECONDS
    local -a k
    read -r -a k <<< "$keys"
    rm -f "$dir/nbd.sock" "$dir/pid"
    case $front in
    nbdkit) timeout "$secs" "$NBDKIT" -U "$dir/nbd.sock" -P "$dir/pid" \
                "$PLUGIN" ctl=none "${k[@]}" 2>"$dir/err" || status=$? ;;
    fuse) timeout "$secs" "$DISCARDFUSE" ctl=none "${k[@]}" "$dir/mnt" \
              2>"$dir/err" || status=$? ;;
    esac
    if [ "$status" -eq 0 ]; then
        [ "$front" = nbdkit ] && stop_pidfile "$dir/pid" nbdkit
        [ "$front" = fuse ] && fusermount3 -u "$dir/mnt"
        fail "$front $keys: started"
    fi
    [ "$status" -ne 124 ] || fail "$front $keys: no answer within $secs s"
    grep -qE -- "$pattern" "$dir/err" ||
        { cat "$dir/err" >&2; fail "$front $keys: no message matching '$pattern'"; }
    leftovers "$front $keys"
    echo "$front: refused in $(( SECONDS - t )) s: $(head -c 300 "$dir/err")"
}

# free_port: a TCP port nobody listens on.
free_port ()
{
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

case_setup ()
{
    local port front
    rbd create --size 64M rbd/base || fail "rbd create"
    rbd snap create rbd/base@s1 >/dev/null 2>&1 || fail "rbd snap create"
    rbd create --size 64M --image-feature layering rbd/nolock || fail "rbd create nolock"
    port=$(free_port)
    sed "s/^mon_host = .*/mon_host = 127.0.0.1:$port/" "$CEPH_CONF" > "$dir/nomon.conf"
    printf '[global\nthis is = = not a ceph.conf\n' > "$dir/garbage.conf"
    for front in nbdkit fuse; do
        refused $front "backend=rbd:rbd/base rbd-conf=$dir/nomon.conf rbd-timeout=2s" \
            "no cluster reachable at mon_host 127.0.0.1:$port .*rbd-timeout=2s" 30
        refused $front "backend=rbd:rbd/base rbd-conf=$dir/missing.conf" \
            "rbd-conf=$dir/missing.conf: No such file"
        refused $front "backend=rbd:rbd/base rbd-conf=$dir/garbage.conf" \
            "rbd-conf=$dir/garbage.conf: not a Ceph configuration file"
        refused $front "backend=rbd:rbd/base rbd-keyring=$dir/missing.keyring" \
            "rbd-keyring=$dir/missing.keyring: No such file"
        refused $front "backend=rbd:nopool/base" "backend=rbd:nopool/base: no pool nopool"
        refused $front "backend=rbd:rbd/nons/base" "no namespace nons in pool rbd"
        refused $front "backend=rbd:rbd/noimage" "backend=rbd:rbd/noimage: no image noimage in pool rbd"
        refused $front "backend=rbd:rbd/base@s1" "snapshot s1 cannot be written: .*readonly=on"
        refused $front "backend=rbd:rbd/base@nosnap readonly=on" "no snapshot nosnap"
        refused $front "backend=rbd:base" "backend=rbd:base: no pool"
        refused $front "backend=rbd:rbd/nolock" "no exclusive-lock feature.*locking=off"
    done
    # What is refused for writing serves read-only, and the image without
    # the lock feature serves with locking=off.
    start_nbdkit -P "$dir/ro.pid" -U "$dir/ro.sock" "$PLUGIN" ctl=none \
        backend=rbd:rbd/base@s1 readonly=on
    /usr/bin/nbdinfo --size "nbd+unix:///?socket=$dir/ro.sock" | grep -qx 67108864 ||
        fail "the snapshot is not served read-only with its size"
    stop_pidfile "$dir/ro.pid" nbdkit
    start_nbdkit -P "$dir/nl.pid" -U "$dir/nl.sock" "$PLUGIN" ctl=none \
        backend=rbd:rbd/nolock locking=off
    stop_pidfile "$dir/nl.pid" nbdkit
}

# --- lock: one writer ----------------------------------------------------

# nbd_write SOCKET: write a block through an NBD server, 0 on success.
nbd_write ()
{
    PATH=/usr/bin:$PATH timeout 60 nbdsh -u "nbd+unix:///?socket=$1" \
        -c 'h.pwrite(b"x" * 4096, 0)' -c 'h.flush()' 2>"$dir/nbdsh.err"
}

case_lock ()
{
    local front qpid
    rbd create --size 64M rbd/locked || fail "rbd create"
    start_nbdkit -P "$dir/l1.pid" -U "$dir/l1.sock" "$PLUGIN" ctl=none \
        backend=rbd:rbd/locked
    # nbdkit writes its pidfile before the plugin's after_fork, which
    # connects again and takes the lock again: until it serves, another
    # server could take the lock in between.
    nbd_write "$dir/l1.sock" || { cat "$dir/nbdsh.err"; fail "the first server cannot write"; }
    KEEP_PIDS=$NBDKIT_PID
    for front in nbdkit fuse; do
        refused $front "backend=rbd:rbd/locked" \
            "backend=rbd:rbd/locked: in use: the image's exclusive lock is held by another discardcache server \(client [^ ]*, pid $NBDKIT_PID on .*locking=off"
    done
    KEEP_PIDS=
    nbd_write "$dir/l1.sock" || { cat "$dir/nbdsh.err"; fail "the first server lost the image"; }
    stop_pidfile "$dir/l1.pid" nbdkit

    # qemu-nbd takes the lock at its first write under librbd's default
    # policy, which hands it over to whoever asks: refuse, do not ask.
    qemu-nbd -t -f raw --discard=unmap -k "$dir/q.sock" \
        "rbd:rbd/locked:conf=$CEPH_CONF" &
    qpid=$!
    cleanup_fn stop_pid "$qpid" qemu-nbd
    wait_started "$qpid" qemu-nbd 30 test -S "$dir/q.sock"
    nbd_write "$dir/q.sock" || { cat "$dir/nbdsh.err"; fail "qemu-nbd cannot write"; }
    for front in nbdkit fuse; do
        refused $front "backend=rbd:rbd/locked" \
            "in use: the image's exclusive lock is held by a client that is not discardcache"
        nbd_write "$dir/q.sock" ||
            { cat "$dir/nbdsh.err"; fail "$front took the lock from qemu-nbd"; }
    done
    stop_pid "$qpid" qemu-nbd
    # Released: served again, by both front-ends in the background: the
    # cluster connection, checked in the parent, is made again after the
    # fork (librados's threads do not cross it), and the lock with it.
    rm -f "$dir/l2.sock"
    "$NBDKIT" -P "$dir/l2.pid" -U "$dir/l2.sock" "$PLUGIN" ctl=none \
        backend=rbd:rbd/locked || fail "nbdkit in the background did not start"
    wait_pidfile "$dir/l2.pid"
    cleanup_fn stop_pidfile "$dir/l2.pid" nbdkit
    nbd_write "$dir/l2.sock" || { cat "$dir/nbdsh.err"; fail "nbdkit in the background cannot write"; }
    KEEP_PIDS=$(cat "$dir/l2.pid")
    refused fuse "backend=rbd:rbd/locked" "in use: the image's exclusive lock"
    KEEP_PIDS=
    stop_pidfile "$dir/l2.pid" nbdkit
    "$DISCARDFUSE" ctl=none backend=rbd:rbd/locked "$dir/mnt" ||
        fail "discardfuse in the background did not start"
    cleanup_fn stop_discardfuse "$dir/mnt" ""
    dd if=/dev/urandom of="$dir/mnt/disk" bs=64k count=16 oflag=direct conv=notrunc,fsync 2>/dev/null ||
        fail "discardfuse in the background cannot write"
    KEEP_PIDS=$(pgrep -f -- "discardfuse .*$dir/mnt\$") KEEP_MOUNT=1
    refused nbdkit "backend=rbd:rbd/locked" "in use: the image's exclusive lock"
    KEEP_PIDS= KEEP_MOUNT=
    fusermount3 -u "$dir/mnt" || fail "fusermount3 -u failed"
    for (( i = 0; i < 100; i++ )); do
        pgrep -f -- "$dir/mnt" >/dev/null || break
        sleep 0.1
    done
}

# --- verify: the concurrent verifier -------------------------------------

case_verify ()
{
    rbd create --size 64M rbd/ident || fail "rbd create"
    # At the default granularity, an object (4 MiB, checked by the xfs
    # case), the verifier's trims (mostly up to 128 KiB) stay pending as
    # fragments: 64k, the override, forwards them.
    verify_run ident rbd:rbd/ident "delay=200ms idle=0 granularity=64k" \
        --ops "$(verify_ops 6000)" --checkpoint 3000
    verify_expect ident forwarded -gt 0
    verify_expect ident granularity -eq 65536
    verify_expect ident max_discard -eq 1073741824
    # backend_allocated_bytes is read in the background, every 5 s while
    # asked for: the statistics at the stop of a short run may predate
    # the writes (the xfs case polls it).
    rbd create --size 64M rbd/thin || fail "rbd create"
    VERIFY_RESTART_KEYS="thin=on granularity=64k slot=64k size=32M meta=$dir/thin.meta"
    verify_run thin rbd:rbd/thin "delay=200ms idle=0 $VERIFY_RESTART_KEYS" \
        --ops "$(verify_ops 6000)" --checkpoint 3000
    verify_expect thin granularity -eq 65536
    verify_expect thin thin_allocated -gt 0
    VERIFY_RESTART_KEYS=
}

# --- crash: kill -9 mid-churn --------------------------------------------

# start_taking_over NAME KEYS...: start nbdkit in the background; after a
# kill -9 of the server before it on the same state=, it must fence that
# one and start at once, not wait for its watch to expire (30 s).
start_taking_over ()
{
    local name=$1 t0 t1
    shift
    rm -f "$dir/$name.sock" "$dir/$name.pid"
    t0=$(date +%s.%N)
    "$NBDKIT" -U "$dir/$name.sock" -P "$dir/$name.pid" "$PLUGIN" "$@" \
        2>"$dir/$name.err" || { cat "$dir/$name.err" >&2; fail "$name: refused"; }
    wait_pidfile "$dir/$name.pid"
    cleanup_fn stop_pidfile "$dir/$name.pid" nbdkit
    t1=$(date +%s.%N)
    TAKEOVER_S=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")
    awk "BEGIN { exit !($TAKEOVER_S < 10) }" ||
        fail "$name: took $TAKEOVER_S s to start (more than 10)"
}

case_crash ()
{
    local round pid model=$dir/crash.model
    local -a vopts
    rbd create --size 64M rbd/crash || fail "rbd create"
    for (( round = 1; round <= 3; round++ )); do
        start_taking_over "c$round" backend=rbd:rbd/crash ctl=none \
            state="$dir/crash.state" delay=$(( round * 100 ))ms idle=0
        [ "$round" -eq 1 ] || echo "crash round $round: started in $TAKEOVER_S s after the kill"
        pid=$(cat "$dir/c$round.pid")
        vopts=(--seed $(( VERIFY_SEED + round )) --ops 0 --seconds 60)
        [ -e "$model" ] && vopts+=(--load-model "$model" --verify-durable)
        "$VERIFY" --uri "nbd+unix:///?socket=$dir/c$round.sock" \
            --until-disconnect --save-model "$model" "${vopts[@]}" \
            > "$dir/c$round.out" 2>&1 &
        local vpid=$!
        cleanup_fn stop_pid "$vpid" verify
        wait_started "$vpid" verify 60 grep -q '^verify: running' "$dir/c$round.out"
        sleep "0.$(( 300 + RANDOM % 700 ))"
        kill -KILL "$pid"
        _stopped_pids[$pid]=1
        wait "$vpid" || verify_failed "crash round $round" "$dir/c$round.out"
        _stopped_pids[$vpid]=1
        echo "crash round $round: $(grep '^verify-result' "$dir/c$round.out")"
    done
    start_taking_over check backend=rbd:rbd/crash ctl=none state="$dir/crash.state"
    echo "crash check: started in $TAKEOVER_S s after the kill"
    "$VERIFY" --uri "nbd+unix:///?socket=$dir/check.sock" --load-model "$model" \
        --verify-durable --verify-only > "$dir/check.out" 2>&1 ||
        verify_failed "crash check" "$dir/check.out"
    stop_pidfile "$dir/check.pid" nbdkit
}

# --- xfs: end to end -------------------------------------------------------

# xfs_round FRONTEND IMAGE: XFS -o discard over the image through that
# front-end; files in, half out, fstrim, clean stop; then again from
# a fresh start, the files left are intact.
xfs_round ()
{
    local front=$1 img=$2 d=$dir/xfs-$1 used_full used_after stats
    mkdir -p "$d"
    rbd create --size 1G "rbd/$img" || fail "rbd create"
    xfs_start "$front" "$d" "$img" mkfs
    cp -a /usr/include/linux "$d/fs/a" && cp -a /usr/include/linux "$d/fs/b" ||
        fail "copy failed"
    # Large files: XFS gives them whole objects, which their delete frees.
    for i in 1 2 3; do
        head -c 16M /dev/urandom > "$d/fs/big$i" || fail "write failed"
    done
    sync -f "$d/fs"
    stats=$(xfs_stats "$front" "$d")
    [ "$(jq -r .granularity <<< "$stats")" -eq 4194304 ] || fail "$front: granularity is not the object size"
    # Read in the background (every 5 s while asked for): 0 until then.
    until_true 15 xfs_allocated_positive "$front" "$d" ||
        fail "$front: backend_allocated_bytes is still 0 after writes: $stats"
    used_full=$(rbd_used "rbd/$img")
    rm -rf "$d/fs/b" "$d/fs"/big?
    find "$d/fs/a" -name '*.h' -size +8k -delete
    (cd "$d/fs" && find a -type f -exec sha256sum {} + > "$d/sums")
    sync -f "$d/fs"
    fstrim "$d/fs" || fail "$front: fstrim failed"
    xfs_stop "$front" "$d"
    used_after=$(rbd_used "rbd/$img")
    echo "$front: rbd du: $used_full bytes with both copies, $used_after after deletes + fstrim + stop"
    # 48 MiB of large files deleted: at least 32 MiB of whole objects.
    [ "$used_after" -le $(( used_full - 32 * 1048576 )) ] ||
        fail "$front: rbd du did not go down by 32 MiB ($used_full -> $used_after)"
    [ "$(json_get "$d/stats.json" forwarded)" -gt 0 ] || fail "$front: nothing forwarded"

    xfs_start "$front" "$d" "$img"
    (cd "$d/fs" && sha256sum --quiet -c "$d/sums") || fail "$front: files differ after a restart"
    xfs_stop "$front" "$d"
}

# xfs_start FRONTEND DIR IMAGE [mkfs]: the stack up, XFS on DIR/fs.
xfs_start ()
{
    local front=$1 d=$2 img=$3
    mkdir -p "$d/fuse" "$d/fs"
    rm -f "$d/nbd.sock" "$d/pid" "$d/stats.json"
    case $front in
    nbdkit)
        start_nbdkit -P "$d/pid" -U "$d/nbd.sock" "$PLUGIN" backend="rbd:rbd/$img" \
            ctl="$d/ctl" statsfile="$d/stats.json" delay=1s idle=50ms
        XFS_PID=$NBDKIT_PID
        E2E_DIR=$d
        e2e_nbdfuse "$d" "$d/nbd.sock" ;;
    fuse)
        start_discardfuse "$d/fuse" backend="rbd:rbd/$img" ctl="$d/ctl" \
            statsfile="$d/stats.json" delay=1s idle=50ms
        XFS_PID=$DISCARDFUSE_PID ;;
    esac
    attach_loop "$d/fuse/disk" || fail "losetup failed"
    XFS_DEV=$LOOP_DEV
    [ "${4:-}" = mkfs ] && { mkfs.xfs -q "$XFS_DEV" || fail "mkfs.xfs failed"; }
    mount -o discard "$XFS_DEV" "$d/fs" || fail "mount failed"
    cleanup_fn umount_if_mounted "$d/fs"
}

xfs_stats ()
{
    "$DISCARDCTL" -s "$2/ctl" stats --json
}

xfs_allocated_positive ()
{
    [ "$(xfs_stats "$1" "$2" | jq -r .backend_allocated_bytes)" -gt 0 ]
}

# xfs_stop FRONTEND DIR: umount, xfs_repair -n, and the server down cleanly.
xfs_stop ()
{
    local front=$1 d=$2
    umount "$d/fs" || fail "umount failed"
    xfs_repair -n "$XFS_DEV" >"$d/repair.out" 2>&1 ||
        { cat "$d/repair.out"; fail "$front: xfs_repair -n found problems"; }
    detach_loop "$XFS_DEV"
    case $front in
    nbdkit)
        E2E_DIR=$d e2e_stop_nbdfuse
        stop_pid "$XFS_PID" nbdkit ;;
    fuse)
        stop_discardfuse "$d/fuse" "$XFS_PID" || fail "discardfuse failed at its stop" ;;
    esac
    wait_for_file "$d/stats.json" || fail "$front: no statistics at the stop"
}

case_xfs ()
{
    requires_loop
    source "$abs_top_srcdir/tests/e2e/e2e-lib.sh"
    xfs_round nbdkit xfsn
    xfs_round fuse xfsf
}

# --- lowwater: space pressure on a pool with a quota -----------------------

MiB=$(( 1024 * 1024 ))

# pool_used POOL: the bytes the pool counts against its quota.
pool_used ()
{
    ceph osd pool get-quota "$1" -f json 2>/dev/null | jq -r .current_num_bytes
}

# until_true SECONDS CMD...: poll CMD every 0.2 s; false after SECONDS.
until_true ()
{
    local end=$(( SECONDS + $1 ))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.2
    done
}

lw_stat ()
{
    "$DISCARDCTL" -s "$LW_DIR/ctl" stats --json | jq -r ".$1"
}

lw_used_at_least () { [ "$(pool_used "$LW_POOL")" -ge "$1" ]; }
lw_used_below () { [ "$(pool_used "$LW_POOL")" -lt "$1" ]; }
lw_stat_is () { [ "$(lw_stat "$1")" = "$2" ]; }
lw_stat_at_least () { [ "$(lw_stat "$1")" -ge "$2" ]; }

# lw_io FRONTEND write|trim OFFSET_MIB LENGTH_MIB: through the front-end
# (libnbd on the socket, or the FUSE disk), then a flush.
lw_io ()
{
    case $1 in
    nbdkit)
        /usr/bin/python3 - "$LW_DIR/nbd.sock" "$2" "$3" "$4" <<'PY' || fail "nbd $2 failed"
import nbd, os, sys
sock, op, off, length = sys.argv[1], sys.argv[2], int(sys.argv[3]) << 20, int(sys.argv[4]) << 20
h = nbd.NBD(); h.connect_unix(sock)
if op == "write":
    buf = os.urandom(4 << 20)
    for o in range(off, off + length, len(buf)):
        h.pwrite(buf, o)
else:
    h.trim(length, off)
h.flush()
PY
        ;;
    fuse)
        if [ "$2" = write ]; then
            dd if=/dev/urandom of="$LW_DIR/mnt/disk" bs=4M seek=$(( $3 / 4 )) \
                count=$(( $4 / 4 )) oflag=direct conv=notrunc,fsync status=none ||
                fail "fuse write failed"
        else
            fallocate --punch-hole --keep-size -o "$(( $3 * MiB ))" \
                -l "$(( $4 * MiB ))" "$LW_DIR/mnt/disk" || fail "fuse trim failed"
        fi ;;
    esac
}

# lowwater_round FRONTEND KEYS...: a pool of its own with a 160 MiB
# quota, 96 MiB written, 80 MiB trimmed (pending: delay=1h), then 32 MiB
# more, which leaves 32 MiB free.  Sets LW_* to what happened.
lowwater_round ()
{
    local front=$1 t
    shift
    LW_POOL=lw$(( ++LW_N )) LW_DIR=$dir/lw$LW_N
    mkdir -p "$LW_DIR/mnt"
    ceph osd pool create "$LW_POOL" 8 >/dev/null 2>&1 || fail "pool create"
    ceph osd pool set "$LW_POOL" size 1 --yes-i-really-mean-it >/dev/null 2>&1
    rbd pool init "$LW_POOL" || fail "rbd pool init"
    ceph osd pool set-quota "$LW_POOL" max_bytes $(( 160 * MiB )) >/dev/null 2>&1 ||
        fail "set-quota"
    rbd create --size 256M "$LW_POOL/img" || fail "rbd create"
    case $front in
    nbdkit)
        start_nbdkit -P "$LW_DIR/pid" -U "$LW_DIR/nbd.sock" "$PLUGIN" \
            backend="rbd:$LW_POOL/img" ctl="$LW_DIR/ctl" delay=1h "$@" ;;
    fuse)
        start_discardfuse "$LW_DIR/mnt" backend="rbd:$LW_POOL/img" \
            ctl="$LW_DIR/ctl" delay=1h "$@" ;;
    esac
    wait_for_ctl "$LW_DIR/ctl"
    lw_io "$front" write 0 96
    lw_io "$front" trim 0 80
    [ "$(lw_stat pending_bytes)" -eq $(( 80 * MiB )) ] ||
        fail "$front: $(lw_stat pending_bytes) bytes pending after the trim, expected 80 MiB"
    # Ceph's statistics lag: wait until the pool counts the 96 MiB, so
    # that the fill below is what takes it under the mark.
    until_true 60 lw_used_at_least $(( 96 * MiB )) ||
        fail "$front: the pool never counted the writes ($(pool_used "$LW_POOL") bytes)"
    [ "$(lw_stat pressure_entered)" -eq 0 ] || fail "$front: under pressure before the fill"
    lw_io "$front" write 96 32
    t=$SECONDS
    until_true 60 lw_used_at_least $(( 128 * MiB )) ||
        until_true 1 lw_stat_is pending_bytes 0 ||
        fail "$front: the pool never counted the fill ($(pool_used "$LW_POOL") bytes)"
    LW_SENT_IN=-1
    if [ $# -gt 0 ]; then
        until_true 30 lw_stat_is pending_bytes 0 && LW_SENT_IN=$(( SECONDS - t ))
        # The space comes back: the pool counts less, and pressure ends.
        until_true 60 lw_used_below $(( 64 * MiB ))
        until_true 30 lw_stat_is pressure 0
        # Pressure ends at the first reading over the mark, while Ceph's
        # statistics still lag; the reading goes on following the pool.
        until_true 30 lw_stat_at_least backend_free_bytes $(( 96 * MiB ))
    else
        sleep 3                         # flusher cycles under a full pool
    fi
    LW_PENDING=$(lw_stat pending_bytes) LW_FORWARDED=$(lw_stat forwarded_bytes)
    LW_PRESSURE_SENT=$(lw_stat pressure_forwarded_bytes)
    LW_ENTERED=$(lw_stat pressure_entered) LW_NOW=$(lw_stat pressure)
    LW_FREE=$(lw_stat backend_free_bytes) LW_USED=$(pool_used "$LW_POOL")
    LW_DU=$(rbd_used "$LW_POOL/img")
    echo "$front $*: pending $LW_PENDING, forwarded $LW_FORWARDED (under" \
         "pressure $LW_PRESSURE_SENT, $LW_SENT_IN s after the fill), pressure" \
         "entered $LW_ENTERED, now $LW_NOW; pool used $LW_USED, free" \
         "$LW_FREE, rbd du $LW_DU"
    case $front in
    nbdkit) stop_pidfile "$LW_DIR/pid" nbdkit ;;
    fuse) stop_discardfuse "$LW_DIR/mnt" "$DISCARDFUSE_PID" ;;
    esac
}

case_lowwater ()
{
    local front
    LW_N=0
    for front in nbdkit fuse; do
        lowwater_round $front low-water=48M
        [ "$LW_PENDING" -eq 0 ] || fail "$front: $LW_PENDING bytes still pending under pressure"
        [ "$LW_PRESSURE_SENT" -ge $(( 80 * MiB )) ] ||
            fail "$front: only $LW_PRESSURE_SENT bytes forwarded under pressure"
        [ "$LW_ENTERED" -ge 1 ] && [ "$LW_NOW" -eq 0 ] ||
            fail "$front: pressure entered $LW_ENTERED times, now $LW_NOW (expected entered, and left)"
        # 48 MiB of data left: the pool counts that, and has the rest.
        [ "$LW_USED" -lt $(( 64 * MiB )) ] ||
            fail "$front: the pool's space did not come back ($LW_USED bytes used)"
        [ "$LW_FREE" -ge $(( 96 * MiB )) ] ||
            fail "$front: the backend reports $LW_FREE bytes free, expected 96 MiB or more"
        [ "$LW_DU" -le $(( 48 * MiB )) ] || fail "$front: rbd du shows $LW_DU bytes"
    done
    lowwater_round nbdkit
    [ "$LW_PENDING" -eq $(( 80 * MiB )) ] && [ "$LW_FORWARDED" -eq 0 ] ||
        fail "without low-water= something moved ($LW_PENDING pending, $LW_FORWARDED forwarded)"
    [ "$LW_USED" -ge $(( 128 * MiB )) ] || fail "without low-water=, the pool counts only $LW_USED bytes"
}

# --- outage, quota, takeover: faults, and what the client is told ----------

NBD_OP=$abs_top_srcdir/tests/ceph/nbd-op

# nbd_op SOCKET OP OFFSET LENGTH [BYTE]: tests/ceph/nbd-op; sets OP_RESULT
# (ok, EIO, ENOSPC, ...) and OP_S (seconds).
nbd_op ()
{
    local out
    out=$(PATH=/usr/bin:$PATH timeout 120 "$NBD_OP" "$@") || fail "nbd-op $*: no answer"
    read -r OP_RESULT OP_S <<< "$out"
}

# expect_op RESULT MAX_SECONDS SOCKET OP ...: nbd_op, which must give
# RESULT within MAX_SECONDS.
expect_op ()
{
    local want=$1 max=$2
    shift 2
    nbd_op "$@"
    [ "$OP_RESULT" = "$want" ] || fail "$2 $3: $OP_RESULT after $OP_S s, expected $want"
    awk "BEGIN { exit !($OP_S <= $max) }" ||
        fail "$2 $3: $OP_RESULT after $OP_S s, more than $max s"
}

# daemon_pid NAME: the pid tests/ceph/cluster recorded for mon.a, osd.0, mgr.x.
daemon_pid ()
{
    awk -v n="$1" '$2 == n { p = $1 } END { print p }' "$dir/ceph/pids"
}

# pause_daemon NAME: SIGSTOP it (no answer at all: the worst outage for
# a timeout), and SIGCONT it at exit whatever happens.
pause_daemon ()
{
    local pid
    pid=$(daemon_pid "$1")
    [ -n "$pid" ] || fail "no pid for $1"
    cleanup_fn kill -CONT "$pid"
    kill -STOP "$pid"
}

resume_daemon ()
{
    kill -CONT "$(daemon_pid "$1")"
}

# stats_fast CTL WHAT: discardctl stats answers within 1 s.
stats_fast ()
{
    local t0 t1 s
    t0=$(date +%s.%N)
    timeout 30 "$DISCARDCTL" -s "$1" stats --json > "$dir/stats.out" ||
        fail "$2: discardctl stats failed"
    t1=$(date +%s.%N)
    s=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")
    echo "$2: discardctl stats answered in $s s"
    awk "BEGIN { exit !($s < 1) }" || fail "$2: discardctl stats took $s s"
}

# until_ok SECONDS SOCKET OP ...: retry nbd_op until it gives ok.
until_ok ()
{
    local end=$(( SECONDS + $1 ))
    shift
    until nbd_op "$@"; [ "$OP_RESULT" = ok ]; do
        [ "$SECONDS" -lt "$end" ] || fail "$2 $3: still $OP_RESULT"
        sleep 0.5
    done
}

# fresh_reading CTL: the backend's free space was read in the last second.
fresh_reading ()
{
    local age
    age=$(ctl_stat "$1" backend_free_age_ms) && [ "$age" -ge 0 ] && [ "$age" -lt 1000 ]
}

case_outage ()
{
    local s=$dir/o.sock ctl=$dir/o.ctl age
    rbd create --size 64M rbd/outage || fail "rbd create"
    start_nbdkit -P "$dir/o.pid" -U "$s" "$PLUGIN" backend=rbd:rbd/outage \
        ctl="$ctl" rbd-timeout=3s
    wait_for_ctl "$ctl"
    expect_op ok 3 "$s" write 0 1M a
    stats_fast "$ctl" "cluster up"
    pause_daemon osd.0
    expect_op EIO 4 "$s" write 4M 64k b
    echo "OSD stopped: write failed with EIO in $OP_S s (rbd-timeout=3s)"
    expect_op EIO 4 "$s" read 0 4k a
    echo "OSD stopped: read failed with EIO in $OP_S s"
    stats_fast "$ctl" "OSD stopped"
    resume_daemon osd.0
    until_ok 30 "$s" write 4M 64k c
    expect_op ok 3 "$s" read 4M 64k c
    expect_op ok 3 "$s" read 0 1M a

    age=$(ctl_stat "$ctl" backend_free_age_ms)
    [ "$age" -ge 0 ] && [ "$age" -lt 2000 ] ||
        fail "cluster up: the free space reading is $age ms old"
    pause_daemon mon.a
    sleep 2.5
    stats_fast "$ctl" "mon stopped"
    # The operator sees that the figure is old (invariant 14).
    age=$(ctl_stat "$ctl" backend_free_age_ms)
    [ "$age" -ge 2000 ] ||
        fail "mon stopped 2.5 s: the free space reading says it is $age ms old"
    echo "mon stopped: stats answer at once, the free space reading $age ms old"
    expect_op ok 3 "$s" write 8M 64k d
    stats_fast "$ctl" "mon stopped, after a write"
    resume_daemon mon.a
    until_true 30 fresh_reading "$ctl" || fail "the free space reading stays old after the mon is back"
    stop_pidfile "$dir/o.pid" nbdkit

    # Without ceph-mgr, a new pool has no statistics: low-water= could
    # never act, so it is refused before serving.
    pause_daemon mgr.x
    ceph osd pool create nomgr 8 >/dev/null 2>&1 || fail "pool create"
    ceph osd pool set nomgr size 1 --yes-i-really-mean-it >/dev/null 2>&1
    rbd pool init nomgr || fail "rbd pool init"
    rbd create --size 64M nomgr/img || fail "rbd create"
    refused nbdkit "backend=rbd:nomgr/img low-water=8M" \
        "low-water: backend=rbd:nomgr/img: the pool's free space cannot be read .*start ceph-mgr, or leave low-water= unset" 30
    grep -q "no figures for pool nomgr yet (no ceph-mgr running?)" "$dir/err" ||
        { cat "$dir/err" >&2; fail "low-water= without ceph-mgr: the cause is not named"; }
    resume_daemon mgr.x
}

# pool_flagged POOL FLAG: the OSD map flags the pool so.
pool_flagged ()
{
    ceph osd pool ls detail | grep "^pool [0-9]* '$1' " | grep -q "flags [^ ]*$2"
}

case_quota ()
{
    local s=$dir/q.sock ctl=$dir/q.ctl
    ceph osd pool create quota 8 >/dev/null 2>&1 || fail "pool create"
    ceph osd pool set quota size 1 --yes-i-really-mean-it >/dev/null 2>&1
    rbd pool init quota || fail "rbd pool init"
    ceph osd pool set-quota quota max_bytes $(( 32 * MiB )) >/dev/null 2>&1 ||
        fail "set-quota"
    rbd create --size 128M quota/img || fail "rbd create"
    # No low-water=: a pool that says it is full frees itself.
    start_nbdkit -P "$dir/q.pid" -U "$s" "$PLUGIN" backend=rbd:quota/img \
        ctl="$ctl" rbd-timeout=3s delay=1h
    wait_for_ctl "$ctl"
    expect_op ok 10 "$s" write 0 40M q
    until_true 60 pool_flagged quota full_quota ||
        fail "the pool was never flagged full_quota"
    expect_op ENOSPC 3 "$s" write 64M 4M n
    echo "quota: a write that needs space failed with ENOSPC in $OP_S s"
    # The pool stops growing; what is written already can change.
    expect_op ok 3 "$s" write 0 64k r
    # Discards are what frees a pool: the trim's 32 MiB, pending (delay=1h),
    # are forwarded, the flag goes, and the write fits.
    expect_op ok 3 "$s" trim 4M 32M
    until_ok 60 "$s" write 64M 4M n
    echo "quota: the pending discards were forwarded and the write fits" \
         "(pressure_forwarded_bytes $(ctl_stat "$ctl" pressure_forwarded_bytes))"
    expect_op ok 3 "$s" read 64M 4M n
    expect_op ok 3 "$s" read 0 64k r
    stop_pidfile "$dir/q.pid" nbdkit
}

case_takeover ()
{
    local old pid
    rbd create --size 64M rbd/take || fail "rbd create"
    start_taking_over t1 backend=rbd:rbd/take ctl=none state="$dir/take.state"
    expect_op ok 3 "$dir/t1.sock" write 0 64k 1
    pid=$(cat "$dir/t1.pid")
    kill -KILL "$pid"
    _stopped_pids[$pid]=1
    start_taking_over t2 backend=rbd:rbd/take ctl=none state="$dir/take.state"
    echo "takeover: restarted in $TAKEOVER_S s after kill -9"
    grep -q "the previous instance of this server .*fencing it" "$dir/t2.err" ||
        fail "no message about fencing the previous instance"
    expect_op ok 3 "$dir/t2.sock" read 0 64k 1
    # Another server (another state=, or none) is refused, named.
    KEEP_PIDS=$(cat "$dir/t2.pid")
    refused nbdkit "backend=rbd:rbd/take state=$dir/other.state" \
        "held by another discardcache server \(client .*, pid $KEEP_PIDS on "
    KEEP_PIDS=

    # Paused, not dead: fenced all the same, and after SIGCONT it can
    # write nothing.
    old=$(cat "$dir/t2.pid")
    mv "$dir/t2.sock" "$dir/paused.sock"
    kill -STOP "$old"
    cleanup_fn kill -CONT "$old"
    start_taking_over t3 backend=rbd:rbd/take ctl=none state="$dir/take.state"
    echo "takeover: a paused holder fenced, restarted in $TAKEOVER_S s"
    expect_op ok 3 "$dir/t3.sock" write 0 64k 3
    kill -CONT "$old"
    nbd_op "$dir/paused.sock" write 0 64k 2
    [ "$OP_RESULT" = EIO ] || fail "the fenced server's write: $OP_RESULT, expected EIO"
    echo "takeover: the fenced server's write failed with $OP_RESULT in $OP_S s"
    expect_op ok 3 "$dir/t3.sock" read 0 64k 3
    stop_pidfile "$dir/t2.pid" nbdkit
    stop_pidfile "$dir/t3.pid" nbdkit
}

t0=$(date +%s)
for c in $CEPH_CASES; do
    case_start=$(date +%s)
    echo "=== $c"
    "case_$c"
    echo "=== $c: ok in $(( $(date +%s) - case_start )) s"
done
echo "ceph: all cases passed in $(( $(date +%s) - t0 )) s"
