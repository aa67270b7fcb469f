# SPDX-License-Identifier: BSD-3-Clause
# discardcache benchmarks, workload "journal" (issue 24): what the
# journal of the pending set costs a flush-heavy client.  Sourced by
# tests/bench/run after lib.sh.  Contenders: discardcache with
# state=FILE and the journal (dc-journal) and the same keys with
# journal=off (dc-nojournal), interleaved, on a sparse file on the
# machine's disk (the state file and journal beside it), so both syncs
# are real.  delay=1h keeps a TRIM of the whole disk pending, so every
# first write into a block cancels a pending range: each write changes
# the pending set, the journal's worst case.
#   fsync=1   fio nbd engine, 4 KiB random writes at QD 1, a FLUSH after
#             each (fio's sync latencies are the FLUSH latencies);
#   xfs-sync  XFS on nbdfuse + loop over the contender, fio psync 4 KiB
#             random writes with O_SYNC (sync=1) into a 256 MiB file
#             (each write then a FUA or a FLUSH through loop).

journal_contender ()
{
    local kind=$1 file=$2
    rm -f "$BENCH_DIR/jstate" "$BENCH_DIR/jstate.journal"
    bench_contender front dc "$file" state="$BENCH_DIR/jstate" delay=1h \
        journal="$([ "$kind" = dc-journal ] && echo on || echo off)"
}

journal_fio_run ()
{
    local rep=$1 kind=$2 file=$BENCH_DIR/journal.img
    rm -f "$file"
    truncate -s "$JOURNAL_SIZE" "$file"
    progress "run $rep: journal $kind: fsync=1"
    journal_contender "$kind" "$file"
    "$PY" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.trim(h.get_size(), 0); h.flush()' \
        "$(bench_uri front)" || fail "the whole-disk TRIM failed"
    bench_fio "$TESTDIR/journal.json" "$(bench_uri front)" --name=j \
        --rw=randwrite --bs=4k --iodepth=1 --fsync=1 --size="$JOURNAL_SIZE" \
        --time_based "${JOURNAL_TIME[@]}"
    bench_stop front
    record --set=workload=journal --set="case=4 KiB random writes, fsync=1 (fio nbd engine)" \
        --set=contender="$kind" --set=rep="$rep" --fio="$TESTDIR/journal.json" \
        --dcstats="$BENCH_DIR/front.stats.json"
}

journal_xfs_run ()
{
    local rep=$1 kind=$2 file=$BENCH_DIR/journal.img
    rm -f "$file"
    truncate -s 1G "$file"
    progress "run $rep: journal $kind: XFS, sync writes"
    journal_contender "$kind" "$file"
    E2E_MKFS_OPTS='' e2e_attach "$BENCH_DIR/stack" "$(bench_sock front)" discard
    fio --output-format=json --output="$TESTDIR/journal-xfs.json" --name=j \
        --filename="$E2E_FS/data" --ioengine=psync --sync=1 --rw=randwrite \
        --bs=4k --size=256m --time_based "${JOURNAL_TIME[@]}" >/dev/null ||
        fail "fio on XFS failed"
    e2e_detach
    bench_stop front
    record --set=workload=journal --set="case=XFS, 4 KiB random O_SYNC writes (fio psync)" \
        --set=contender="$kind" --set=rep="$rep" --fio="$TESTDIR/journal-xfs.json" \
        --dcstats="$BENCH_DIR/front.stats.json"
}

# At least JOURNAL_MIN_REPS runs: the targets' margins (5% and 10%) are
# narrower than one pair's swing on a shared machine, and these runs are
# short.
workload_journal ()
{
    local rep kind n=$(( reps > JOURNAL_MIN_REPS ? reps : JOURNAL_MIN_REPS ))
    for (( rep = 1; rep <= n; rep++ )); do
        for kind in $(in_order "$rep" dc-nojournal dc-journal); do
            journal_fio_run "$rep" "$kind"
        done
        fs_possible || continue
        for kind in $(in_order "$rep" dc-nojournal dc-journal); do
            journal_xfs_run "$rep" "$kind"
        done
    done
    fs_possible || progress "journal: XFS rows SKIPPED (needs root, /dev/fuse, loop, nbdfuse, mkfs.xfs)"
}
