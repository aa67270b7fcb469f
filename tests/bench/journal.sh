# SPDX-License-Identifier: BSD-3-Clause
# discardcache benchmarks, workload "journal" (issue 24): what the
# journal of the pending set costs a flush-heavy client.  Sourced by
# tests/bench/run after lib.sh.  Contenders: discardcache with
# state=FILE and the journal (dc-journal) and the same keys with
# journal=off (dc-nojournal), each on a sparse file of its own on the
# machine's disk (the state file and journal beside it), so both syncs
# are real.  delay=1h keeps a TRIM of the whole disk pending, so every
# first write into a block cancels a pending range: each write changes
# the pending set, the journal's worst case.
#   fsync=1   fio nbd engine, 4 KiB random writes at QD 1, a FLUSH after
#             each (fio's sync latencies are the FLUSH latencies);
#   xfs-sync  XFS on nbdfuse + loop over each contender, fio psync 4 KiB
#             random writes with O_SYNC (sync=1) into a 256 MiB file
#             (each write then a FUA or a FLUSH through loop).
#
# Both contenders run at once and fio alternates between them in short
# slices (JOURNAL_SLICES pairs a run, ABBA), each slice a record: this
# disk's latency drifts over seconds, so that 6 s runs 8 s apart ranged
# from 0.85x to 1.31x of each other, against targets 5% and 10% wide.
# Slices side by side see the same disk.

# dc-journal-base: dc-journal's keys in the baseline build
# (tests/bench/baseline.sh), the third of each slice round where there is
# one: what the journal costs writes now against what it cost before.
JOURNAL_KINDS=(dc-nojournal dc-journal)

# journal_start_both SIZE: both contenders, each on a new sparse file.
journal_start_both ()
{
    local kind
    for kind in "${JOURNAL_KINDS[@]}"; do
        rm -f "$BENCH_DIR/$kind.img" "$BENCH_DIR/$kind.state" "$BENCH_DIR/$kind.state.journal"
        truncate -s "$1" "$BENCH_DIR/$kind.img"
        bench_contender "$kind" "$([ "$kind" = dc-journal-base ] && echo dc-base || echo dc)" \
            "$BENCH_DIR/$kind.img" state="$BENCH_DIR/$kind.state" \
            delay=1h journal="$([ "$kind" = dc-nojournal ] && echo off || echo on)"
    done
}

# journal_stop_both REP CASE: stop both; their statistics (journal
# commits, syncs, records over the run's slices) are a record each.
journal_stop_both ()
{
    local rep=$1 case=$2 kind
    for kind in "${JOURNAL_KINDS[@]}"; do
        bench_stop "$kind"
        record --set=workload=journal --set="case=$case" --set=contender="$kind" \
            --set=rep="$rep" --dcstats="$BENCH_DIR/$kind.stats.json"
    done
}

# journal_slices REP CASE RUNNER: JOURNAL_SLICES pairs of RUNNER KIND
# JSON, the order turned round at each pair; each slice is recorded as
# run REP.SLICE.  The runners pass fio --randrepeat=0: by default each
# fio run writes the same offsets as the one before (fio 3.33 keeps them
# with any --randseed too), a slice then cancels nothing, and the
# journal has nothing to record (*records a write* in the report).
journal_slices ()
{
    local rep=$1 case=$2 run=$3 s kind
    for (( s = 1; s <= JOURNAL_SLICES; s++ )); do
        for kind in $(in_order $(( rep + s )) "${JOURNAL_KINDS[@]}"); do
            "$run" "$kind" "$TESTDIR/journal.json"
            record --set=workload=journal --set="case=$case" --set=contender="$kind" \
                --set=rep="$rep.$s" --fio="$TESTDIR/journal.json"
        done
    done
}

journal_fsync_slice ()
{
    bench_fio "$2" "$(bench_uri "$1")" --name=j --rw=randwrite --bs=4k --iodepth=1 \
        --fsync=1 --size="$JOURNAL_SIZE" --randrepeat=0 --time_based "${JOURNAL_TIME[@]}"
}

journal_fio_run ()
{
    local rep=$1 kind case="4 KiB random writes, fsync=1 (fio nbd engine)"
    progress "run $rep: journal: fsync=1, $JOURNAL_SLICES slice pairs"
    journal_start_both "$JOURNAL_SIZE"
    for kind in "${JOURNAL_KINDS[@]}"; do
        "$PY" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.trim(h.get_size(), 0); h.flush()' \
            "$(bench_uri "$kind")" || fail "the whole-disk TRIM of $kind failed"
    done
    journal_slices "$rep" "$case" journal_fsync_slice
    journal_stop_both "$rep" "$case"
}

# XFS on each contender at once: e2e-lib keeps one stack in its globals,
# so each stack's are kept here and put back to take it down.
declare -A journal_fs=() journal_dev=() journal_fuse=()
journal_cleanup_registered=false

journal_mount_both ()
{
    local kind
    if ! $journal_cleanup_registered; then
        cleanup_fn journal_unmount_both
        journal_cleanup_registered=true
    fi
    for kind in "${JOURNAL_KINDS[@]}"; do
        E2E_MKFS_OPTS='' e2e_attach "$BENCH_DIR/stack-$kind" "$(bench_sock "$kind")" discard
        journal_fs[$kind]=$E2E_FS journal_dev[$kind]=$E2E_DEV journal_fuse[$kind]=$E2E_NBDFUSE_PID
        # Laid out as the slices' job does (fallocate: unwritten extents,
        # nothing written), so that their first write into a block cancels
        # a pending range.
        journal_xfs_job "$E2E_FS/data" --create_only=1 >/dev/null ||
            fail "fio could not lay out the file on $kind's XFS"
    done
}

journal_unmount_both ()
{
    local kind
    for kind in "${!journal_fs[@]}"; do
        E2E_DIR=$BENCH_DIR/stack-$kind E2E_FS=${journal_fs[$kind]}
        E2E_DEV=${journal_dev[$kind]} E2E_NBDFUSE_PID=${journal_fuse[$kind]}
        e2e_detach
        unset "journal_fs[$kind]"
    done
}

# journal_xfs_job FILE FIO-ARGS...
journal_xfs_job ()
{
    local file=$1
    shift
    fio --name=j --filename="$file" --ioengine=psync --sync=1 --rw=randwrite --bs=4k \
        --size=256m "$@"
}

journal_xfs_slice ()
{
    journal_xfs_job "${journal_fs[$1]}/data" --output-format=json --output="$2" \
        --randrepeat=0 --time_based "${JOURNAL_TIME[@]}" >/dev/null ||
        fail "fio on $1's XFS failed"
}

journal_xfs_run ()
{
    local rep=$1 case="XFS, 4 KiB random O_SYNC writes (fio psync)"
    progress "run $rep: journal: XFS, sync writes, $JOURNAL_SLICES slice pairs"
    journal_start_both 1G
    journal_mount_both
    journal_slices "$rep" "$case" journal_xfs_slice
    journal_unmount_both
    journal_stop_both "$rep" "$case"
}

workload_journal ()
{
    local rep
    [ "$BENCH_BASE" = yes ] && JOURNAL_KINDS+=(dc-journal-base)
    for (( rep = 1; rep <= reps; rep++ )); do
        journal_fio_run "$rep"
        fs_possible || continue
        journal_xfs_run "$rep"
    done
    fs_possible || progress "journal: XFS rows SKIPPED (needs root, /dev/fuse, loop, nbdfuse, mkfs.xfs)"
}
