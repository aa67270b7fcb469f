# SPDX-License-Identifier: BSD-3-Clause
# discardcache's guest harness: helpers for a script running inside the
# guest (tests/guest/run exports GUEST_LIB with this file's path).
# Source tests/functions.sh first when you want its cleanup hooks.
#
#   guest_disks_load            load the drivers of the disks in
#                               GUEST_DISKS and wait (30 s) for each
#   guest_disk SERIAL           the disk's /dev path, by its serial
#   guest_disk_of KIND [N]      the Nth (from 0) disk of KIND (sata, nvme,
#                               scsi) in the order given to run
#   guest_disk_file DEV         the host's image file behind DEV
#   guest_disk_kind DEV         its KIND
#   guest_discards DEV          discards the disk completed: "IOS
#                               MERGED SECTORS MS" (/proc/diskstats
#                               fields 15-18)
#   guest_queue DEV NAME        /sys/block/DEV/queue/NAME
#   guest_trace_start DEV, guest_trace_stop FILE
#                               record every discard bio queued to DEV
#                               (tracefs block_bio_queue) into FILE:
#                               "SECTOR SECTORS COMM" lines
#
# The disks' serials are what QEMU was given (tests/guest/run --disk):
# ATA and SCSI disks show them in VPD page 0x80, NVMe controllers in
# their serial attribute.

[ "${GUEST:-}" = 1 ] || { echo "guest-lib.sh: not inside a guest (tests/guest/run)" >&2; exit 1; }

# _guest_serial_of NAME: the serial of /sys/block/NAME, trimmed.
_guest_serial_of ()
{
    local s=
    case $1 in
    nvme*) s=$(cat "/sys/block/$1/device/serial" 2>/dev/null) ;;
    sd*) s=$(tail -c +5 "/sys/block/$1/device/vpd_pg80" 2>/dev/null | tr -d '\0') ;;
    esac
    s=${s#"${s%%[! ]*}"}
    echo "${s%"${s##*[! ]}"}"
}

guest_disk ()
{
    local b
    for b in /sys/block/sd* /sys/block/nvme*n*; do
        [ -e "$b" ] || continue
        if [ "$(_guest_serial_of "${b##*/}")" = "$1" ]; then
            echo "/dev/${b##*/}"
            return 0
        fi
    done
    return 1
}

guest_disk_of ()
{
    local kind=$1 n=${2:-0} d k s f i=0
    for d in $GUEST_DISKS; do
        IFS=: read -r k s f <<< "$d"
        [ "$k" = "$kind" ] || continue
        if [ "$i" -eq "$n" ]; then
            guest_disk "$s"
            return
        fi
        i=$(( i + 1 ))
    done
    return 1
}

# _guest_disk_field DEV file|kind: that field of DEV's GUEST_DISKS entry.
_guest_disk_field ()
{
    local d k s f serial
    serial=$(_guest_serial_of "${1#/dev/}")
    for d in $GUEST_DISKS; do
        IFS=: read -r k s f <<< "$d"
        [ "$s" = "$serial" ] || continue
        case $2 in file) echo "$f" ;; kind) echo "$k" ;; esac
        return 0
    done
    return 1
}

guest_disk_file () { _guest_disk_field "$1" file; }
guest_disk_kind () { _guest_disk_field "$1" kind; }

guest_disks_load ()
{
    local d k s f i
    for d in $GUEST_DISKS; do
        IFS=: read -r k s f <<< "$d"
        case $k in
        sata) modprobe -a ahci sd_mod ;;
        nvme) modprobe nvme ;;
        scsi) modprobe -a virtio_scsi sd_mod ;;
        esac || { echo "guest_disks_load: modprobe for $k failed" >&2; return 1; }
    done
    for d in $GUEST_DISKS; do
        IFS=: read -r k s f <<< "$d"
        for (( i = 0; i < 300; i++ )); do
            guest_disk "$s" > /dev/null && break
            sleep 0.1
        done
        guest_disk "$s" > /dev/null ||
            { echo "guest_disks_load: no disk with serial $s ($k) after 30 s" >&2; return 1; }
    done
}

guest_discards ()
{
    awk -v d="${1#/dev/}" '$3 == d { print $15, $16, $17, $18; found = 1 }
        END { exit !found }' /proc/diskstats
}

guest_queue ()
{
    cat "/sys/block/${1#/dev/}/queue/$2"
}

_guest_tracefs ()
{
    local t=/sys/kernel/tracing
    [ -e $t/events ] || mount -t tracefs tracefs $t 2>/dev/null
    [ -e $t/events/block/block_bio_queue ] || return 1
    echo $t
}

guest_trace_start ()
{
    local t dev=${1#/dev/} majmin
    t=$(_guest_tracefs) || { echo "guest_trace_start: no tracefs block events" >&2; return 1; }
    majmin=$(cat "/sys/block/$dev/dev")
    echo 0 > $t/tracing_on
    echo > $t/trace
    echo 16384 > $t/buffer_size_kb
    # dev in the event is (major << 20) | minor.
    echo "dev == $(( (${majmin%:*} << 20) | ${majmin#*:} ))" > $t/events/block/block_bio_queue/filter
    echo 1 > $t/events/block/block_bio_queue/enable
    echo 1 > $t/tracing_on
}

guest_trace_stop ()
{
    local t
    t=$(_guest_tracefs) || return 1
    echo 0 > $t/tracing_on
    echo 0 > $t/events/block/block_bio_queue/enable
    # "... block_bio_queue: 8,0 DS 2048 + 128 [nbdkit]": discards only.
    awk '/block_bio_queue:/ {
            for (i = 1; i <= NF; i++) if ($i == "block_bio_queue:") break
            rwbs = $(i + 2)
            if (rwbs !~ /D/) next
            comm = $(i + 6); gsub(/[\[\]]/, "", comm)
            print $(i + 3), $(i + 5), comm
        }' $t/trace > "$1"
    if awk '$1 == "overrun:" && $2 > 0 { bad = 1 } END { exit !bad }' $t/per_cpu/cpu*/stats; then
        echo "guest_trace_stop: the trace buffer overran: the record is incomplete" >&2
        return 1
    fi
    echo > $t/trace
}
