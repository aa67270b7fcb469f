# SPDX-License-Identifier: BSD-3-Clause
# discardcache's guest harness: the card's line, run inside the guest
# (tests/guest/run) on a real kernel NBD client in front of an emulated
# disk:
#
#   nbdkit discardcache backend=/dev/sdX (-U SOCKET) ; nbd-client -u SOCKET
#   /dev/nbd0 [-C N] ; mkfs ; mount -o discard ; churn ; fstrim ;
#   discardctl flush --wait ; discardctl stats ; umount ; nbd-client -d ;
#   stop ; start again ; attach again ; every file verified ; fsck
#
# Source tests/functions.sh and $GUEST_LIB first.  card_line measures the
# disk's own truth: the discards it completed (/proc/diskstats) from the
# server's start to its stop, and what the host's image file holds.
#
#   card_line NAME DEV FS MODE [OPTIONS]
#     FS       xfs | ext4
#     MODE     discardcache (the defaults) | passthrough (discardcache
#              passthrough=true: every TRIM at once) | file (nbdkit's own
#              file plugin, Debian's 1.32)
#     --conns N        nbd-client -C N (1); with N > 1 an nbdkit log
#                      filter records which connection each write used
#     --keys "K=V ..." more plugin keys
#     --workload churn:ROUNDS:FILES:MAXKIB (churn.py, seeded) |
#                pchurn:ROUNDS:FILES:MAXKIB (one churn.py per CPU, pinned) |
#                include:N (untar /usr/include N times, delete half of
#                the files, rm -rf the rest: nothing is verified then)
#     --restart        detach, stop, start again, attach, verify, fsck
#     --trace          record every discard bio the disk got (tracefs)
#                      and check each is aligned to its
#                      discard_granularity and within discard_max_bytes
#   Results: $GUEST_OUT/NAME.result (KEY=VALUE lines: discards, sectors,
#   disk_ms, the steps' times in ms, image_bytes, conns_used, stats...)
#   and $GUEST_OUT/NAME.stats.json (discardcache's statistics at the
#   stop).  Fails the test (fail) on any error, a bad file, an fsck
#   complaint or a misaligned discard.

CARD_NBD=/dev/nbd0
CHURN_PY=$abs_top_srcdir/tests/e2e/churn.py
# The card's churn, card_line's default --workload.
CARD_WORKLOAD=churn:6:40:1024

# _card_now: milliseconds since the epoch.
_card_now () { echo $(( $(date +%s%N) / 1000000 )); }

# card_result NAME KEY VALUE
card_result () { echo "$2=$3" >> "$GUEST_OUT/$1.result"; }

# card_get NAME KEY: a value card_line wrote.
card_get () { awk -F= -v k="$2" '$1 == k { v = substr($0, length(k) + 2) } END { print v }' "$GUEST_OUT/$1.result"; }

# card_qemu_nbd DEV DIR: qemu-nbd serving DEV on DIR/q.sock with O_DIRECT
# (--cache=none) and discards on (BLKDISCARD), for the verifier; QPID is
# its pid, stopped at exit.
card_qemu_nbd ()
{
    rm -f "$2/q.sock"
    qemu-nbd -f raw --cache=none --aio=threads --discard=unmap -t -e 4 \
        -k "$2/q.sock" "$1" &
    QPID=$!
    cleanup_fn stop_pid "$QPID" qemu-nbd
    wait_started "$QPID" qemu-nbd 30 test -S "$2/q.sock"
}

# card_verify DEV DIR SEED OPS: the verifier (tests/verifier/) through
# card_qemu_nbd DEV DIR, its model saved to DIR/model; qemu-nbd stopped.
# card_verify_check DEV DIR: every block of DEV against DIR/model.
card_verify ()
{
    card_qemu_nbd "$1" "$2"
    "$abs_top_builddir/tests/verifier/verify" --uri "nbd+unix:///?socket=$2/q.sock" \
        --seed "$3" --ops "$4" --connections 2 --depth 8 --save-model "$2/model" \
        > "$2/verify.out" 2>&1 ||
        { cat "$2/verify.out" >&2; fail "the verifier failed through $1 (seed $3)"; }
    grep '^verify-result:' "$2/verify.out"
    stop_pid "$QPID" qemu-nbd
}

card_verify_check ()
{
    card_qemu_nbd "$1" "$2"
    "$abs_top_builddir/tests/verifier/verify" --uri "nbd+unix:///?socket=$2/q.sock" \
        --load-model "$2/model" --verify-only --connections 1 > "$2/check.out" 2>&1 ||
        { cat "$2/check.out" >&2; fail "after the restart, blocks of $1 differ from the model"; }
    grep '^verify-result:' "$2/check.out"
    stop_pid "$QPID" qemu-nbd
}

card_modules ()
{
    [ -e $CARD_NBD ] || modprobe nbd || fail "modprobe nbd failed"
}

# card_server NAME DEV MODE LOG KEYS...: start nbdkit on $CW/NAME.sock.
card_server ()
{
    local name=$1 dev=$2 mode=$3 log=$4
    shift 4
    local -a filt=()
    rm -f "$CW/$name.sock"
    # The filter's key goes after the plugin, with the plugin's keys.
    [ "$log" = yes ] && filt=(--filter=log) && set -- "$@" logfile="$CW/$name.nbdlog"
    case $mode in
    discardcache)
        start_nbdkit -P "$CW/$name.pid" -U "$CW/$name.sock" "${filt[@]}" "$PLUGIN" \
            backend="$dev" ctl="$CW/$name.ctl" statsfile="$CW/$name.stats.json" "$@" ;;
    passthrough)
        start_nbdkit -P "$CW/$name.pid" -U "$CW/$name.sock" "${filt[@]}" "$PLUGIN" \
            backend="$dev" ctl="$CW/$name.ctl" statsfile="$CW/$name.stats.json" \
            passthrough=true "$@" ;;
    file)
        start_nbdkit -P "$CW/$name.pid" -U "$CW/$name.sock" "${filt[@]}" file \
            file="$dev" "$@" ;;
    *) fail "card_server: MODE $mode: discardcache, passthrough or file" ;;
    esac
    CARD_PID=$NBDKIT_PID
    [ "$mode" = file ] || wait_for_ctl "$CW/$name.ctl"
}

card_stop_server ()
{
    stop_pid "$CARD_PID" nbdkit
}

# card_attach SOCKET CONNS: the kernel client on $CARD_NBD.
card_attach ()
{
    local -a c=()
    [ "$2" -gt 1 ] && c=(-C "$2")
    nbd-client -u "$1" "$CARD_NBD" "${c[@]}" > "$CW/nbd-client.log" 2>&1 ||
        { cat "$CW/nbd-client.log" >&2; fail "nbd-client -u $1 $CARD_NBD ${c[*]} failed"; }
    cleanup_fn card_detach
    local i
    for (( i = 0; i < 100; i++ )); do
        [ "$(cat /sys/block/${CARD_NBD#/dev/}/size)" -gt 0 ] && return 0
        sleep 0.1
    done
    fail "$CARD_NBD has no size after nbd-client"
}

card_detach ()
{
    [ "$(cat /sys/block/${CARD_NBD#/dev/}/size 2>/dev/null)" != 0 ] || return 0
    nbd-client -d "$CARD_NBD" > /dev/null 2>&1
    local i
    for (( i = 0; i < 100; i++ )); do
        [ "$(cat /sys/block/${CARD_NBD#/dev/}/size)" = 0 ] && return 0
        sleep 0.1
    done
    return 1
}

card_mkfs ()
{
    case $1 in
    xfs) mkfs.xfs -q -f "$CARD_NBD" ;;
    ext4) mkfs.ext4 -q -F "$CARD_NBD" ;;
    *) fail "FS $1: xfs or ext4" ;;
    esac || fail "mkfs.$1 on $CARD_NBD failed"
}

card_fsck ()
{
    case $1 in
    xfs) xfs_repair -n "$CARD_NBD" ;;
    ext4) e2fsck -fn "$CARD_NBD" ;;
    esac > "$CW/fsck.log" 2>&1 || { cat "$CW/fsck.log" >&2; fail "fsck ($1) of $CARD_NBD is not clean"; }
}

card_mount ()
{
    mkdir -p "$CW/fs"
    mount ${1:+-o "$1"} "$CARD_NBD" "$CW/fs" || fail "mount ${1:+-o $1} $CARD_NBD failed"
    cleanup_fn umount_if_mounted "$CW/fs"
}

# card_allocated FILE: bytes the host's image file holds.
card_allocated () { echo $(( $(stat -c %b "$1") * $(stat -c %B "$1") )); }

# card_workload NAME SPEC: on the mounted $CW/fs.
card_workload ()
{
    local name=$1 spec=$2 rounds files maxkib n i
    case $spec in
    churn:*)
        IFS=: read -r _ rounds files maxkib <<< "$spec"
        /usr/bin/python3 "$CHURN_PY" run "$CW/fs" "$CW/$name.manifest" --seed 1 \
            --rounds "$rounds" --files "$files" --max-kib "$maxkib" > "$CW/churn.log" ||
            { cat "$CW/churn.log" >&2; fail "churn failed"; } ;;
    pchurn:*)
        # One churn per CPU, each pinned to its CPU in its own directory:
        # each fsync submits from its CPU, so from its own nbd hardware
        # queue, which is one connection of nbd-client -C N.
        IFS=: read -r _ rounds files maxkib <<< "$spec"
        local -a pids=()
        for (( i = 0; i < $(nproc); i++ )); do
            mkdir -p "$CW/fs/p$i"
            taskset -c "$i" /usr/bin/python3 "$CHURN_PY" run "$CW/fs/p$i" "$CW/$name.manifest.$i" \
                --seed $(( i + 1 )) --rounds "$rounds" --files "$files" --max-kib "$maxkib" \
                > "$CW/churn.$i.log" 2>&1 &
            pids+=($!)
        done
        for i in "${!pids[@]}"; do
            wait "${pids[i]}" || { cat "$CW/churn.$i.log" >&2; fail "churn $i failed"; }
        done ;;
    include:*)
        n=${spec#include:}
        for (( i = 0; i < n; i++ )); do
            mkdir "$CW/fs/inc$i"
            tar -C / -cf - usr/include | tar -C "$CW/fs/inc$i" -xf - || fail "untar $i failed"
            sync
        done
        # Delete half of the files, then everything.
        find "$CW/fs" -type f | awk 'NR % 2' | xargs -r rm -f
        sync
        rm -rf "${CW:?}"/fs/inc*
        sync ;;
    *) fail "card_workload: $spec" ;;
    esac
}

card_line ()
{
    local name=$1 dev=$2 fs=$3 mode=$4
    shift 4
    local conns=1 keys= workload=$CARD_WORKLOAD restart=false trace=false
    while [ $# -gt 0 ]; do
        case $1 in
        --conns) conns=$2; shift ;;
        --keys) keys=$2; shift ;;
        --workload) workload=$2; shift ;;
        --restart) restart=true ;;
        --trace) trace=true ;;
        *) fail "card_line: unknown option $1" ;;
        esac
        shift
    done
    local -a k=()
    read -r -a k <<< "$keys"
    CW=$(mktemp -d /tmp/card.XXXXXX)
    local file log=no d0 d1 t0 t t_mkfs t_churn t_fstrim t_flush t_stop alloc
    file=$(guest_disk_file "$dev") || fail "no image file known for $dev"
    rm -f "$GUEST_OUT/$name.result"
    [ "$conns" -gt 1 ] && log=yes
    card_modules

    echo "== $name: $mode on $dev ($(guest_disk_kind "$dev")), $fs, $conns connection(s), $workload"
    # A clean start: the whole disk discarded, so that every run begins
    # from the same empty image.
    blkdiscard -f "$dev" || fail "blkdiscard $dev failed"
    $trace && { guest_trace_start "$dev" || fail "no discard tracing"; }
    d0=$(guest_discards "$dev")
    t0=$(_card_now)
    card_server "$name" "$dev" "$mode" "$log" "${k[@]}"
    card_attach "$CW/$name.sock" "$conns"
    t=$(_card_now); card_mkfs "$fs"; t_mkfs=$(( $(_card_now) - t ))
    # ext4 zeroes its inode tables from a kernel thread after the first
    # mount, as fast as the disk goes: what the image holds at the end
    # would depend on timing.  noinit_itable leaves them be, so that
    # contenders compare.
    if [ "$fs" = ext4 ]; then card_mount discard,noinit_itable; else card_mount discard; fi
    t=$(_card_now); card_workload "$name" "$workload"; t_churn=$(( $(_card_now) - t ))
    t=$(_card_now)
    fstrim -v "$CW/fs" > "$CW/fstrim.log" 2>&1 || { cat "$CW/fstrim.log" >&2; fail "fstrim failed"; }
    t_fstrim=$(( $(_card_now) - t ))
    t=$(_card_now)
    if [ "$mode" != file ]; then
        "$DISCARDCTL" -s "$CW/$name.ctl" flush --wait > /dev/null || fail "discardctl flush --wait failed"
        "$DISCARDCTL" -s "$CW/$name.ctl" stats > "$GUEST_OUT/$name.stats.txt" || fail "discardctl stats failed"
        # Nothing pending but counted sub-granule fragments (DESIGN,
        # invariant 2).
        local js pend sub
        js=$("$DISCARDCTL" -s "$CW/$name.ctl" stats --json) || fail "discardctl stats --json failed"
        pend=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["pending_bytes"])' "$js")
        sub=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["subgranule_bytes"])' "$js")
        [ "$pend" = "$sub" ] ||
            fail "discards still pending after flush --wait: $pend bytes, $sub of them sub-granule"
    fi
    t_flush=$(( $(_card_now) - t ))
    umount "$CW/fs" || fail "umount failed"
    card_detach || fail "nbd-client -d failed"
    t=$(_card_now); card_stop_server; t_stop=$(( $(_card_now) - t ))
    local total=$(( $(_card_now) - t0 ))
    d1=$(guest_discards "$dev")
    if $trace; then
        guest_trace_stop "$GUEST_OUT/$name.trace" || fail "discard trace incomplete"
    fi
    alloc=$(card_allocated "$file")
    [ "$mode" = file ] || cp "$CW/$name.stats.json" "$GUEST_OUT/$name.stats.json"

    local -a a b
    read -r -a a <<< "$d0"
    read -r -a b <<< "$d1"
    card_result "$name" kind "$(guest_disk_kind "$dev")"
    card_result "$name" fs "$fs"
    card_result "$name" mode "$mode"
    card_result "$name" conns "$conns"
    card_result "$name" discards $(( b[0] - a[0] ))
    card_result "$name" merged $(( b[1] - a[1] ))
    card_result "$name" discard_bytes $(( (b[2] - a[2]) * 512 ))
    card_result "$name" disk_ms $(( b[3] - a[3] ))
    card_result "$name" image_bytes "$alloc"
    card_result "$name" ms_mkfs "$t_mkfs"
    card_result "$name" ms_churn "$t_churn"
    card_result "$name" ms_fstrim "$t_fstrim"
    card_result "$name" ms_flush "$t_flush"
    card_result "$name" ms_stop "$t_stop"
    card_result "$name" ms_total "$total"
    if [ "$mode" != file ]; then
        card_result "$name" trims "$(json_get "$CW/$name.stats.json" trims)"
        card_result "$name" forwarded "$(json_get "$CW/$name.stats.json" forwarded)"
        card_result "$name" subgranule_bytes "$(json_get "$CW/$name.stats.json" subgranule_bytes)"
        card_result "$name" dropped_bytes "$(json_get "$CW/$name.stats.json" dropped_bytes)"
    fi
    if [ "$log" = yes ]; then
        card_result "$name" conns_used \
            "$(awk '/ Write id=/ { for (i = 1; i <= NF; i++) if ($i ~ /^connection=/) print $i }' \
                   "$CW/$name.nbdlog" | sort -u | wc -l)"
    fi
    $trace && card_check_trace "$name" "$dev"
    echo "   disk: $(( b[0] - a[0] )) discards, $(( (b[2] - a[2]) / 2048 )) MiB; image holds" \
         "$(( alloc / 1048576 )) MiB; total $total ms (mkfs $t_mkfs, churn $t_churn," \
         "fstrim $t_fstrim, flush $t_flush, stop $t_stop)"

    if $restart; then
        card_server "$name.2" "$dev" "$mode" no "${k[@]}"
        card_attach "$CW/$name.2.sock" "$conns"
        card_mount ""
        local m dir checked=0
        : > "$CW/verify.log"
        for m in "$CW/$name".manifest*; do
            [ -e "$m" ] || fail "--restart needs a churn workload (files to verify)"
            dir=$CW/fs
            [ "$m" = "$CW/$name.manifest" ] || dir=$CW/fs/p${m##*.}
            /usr/bin/python3 "$CHURN_PY" verify "$dir" "$m" > "$CW/verify.1.log" 2>&1 ||
                { cat "$CW/verify.1.log" >&2; fail "$name: files differ after the restart"; }
            cat "$CW/verify.1.log" >> "$CW/verify.log"
            checked=$(( checked + $(awk '/files checked/ { print $2 }' "$CW/verify.1.log") ))
        done
        card_result "$name" verified "$checked"
        umount "$CW/fs" || fail "umount failed"
        card_fsck "$fs"
        card_detach || fail "nbd-client -d failed"
        card_stop_server
        echo "   after a restart: $checked files checked, none bad; fsck clean"
    fi
    rm -rf "$CW"
}

# card_check_trace NAME DEV: every discard bio the disk got is aligned to
# its discard_granularity (its end may be the disk's end) and no longer
# than discard_max_bytes.
card_check_trace ()
{
    local name=$1 dev=$2 gran max size bad n
    gran=$(guest_queue "$dev" discard_granularity)
    max=$(guest_queue "$dev" discard_max_bytes)
    size=$(( $(cat "/sys/block/${dev#/dev/}/size") * 512 ))
    n=$(wc -l < "$GUEST_OUT/$name.trace")
    bad=$(awk -v g="$gran" -v m="$max" -v s="$size" '
        $3 != "blkdiscard" {
            off = $1 * 512; len = $2 * 512; end = off + len
            if (off % g || (end % g && end != s) || len > m) { print; n++ }
        } END { exit 0 }' "$GUEST_OUT/$name.trace" | tee "$GUEST_OUT/$name.trace.bad" | wc -l)
    card_result "$name" traced_discards "$n"
    card_result "$name" misaligned "$bad"
    echo "   trace: $n discard bios, $bad not aligned to $gran or over $max bytes"
    [ "$bad" -eq 0 ] || { head "$GUEST_OUT/$name.trace.bad" >&2; fail "$name: discards that do not honour $dev's queue limits"; }
}
