/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's statistics, listed once (the form of an
 * entry is in stats-def.h).  volume.h makes struct thin_stats of it; in
 * JSON and text each is named thin_NAME, present only with thin=on.
 */
#ifndef DISCARDCACHE_THIN_STATS_H
#define DISCARDCACHE_THIN_STATS_H

#include "stats-def.h"

#define THIN_STATS(X)                                                        \
  X (U64, slot, NONE, NULL, NULL, 1,                                         \
     "Thin mode: the slot size in bytes.")                                   \
  X (U64, size, NONE, NULL, NULL, 1,                                         \
     "Thin mode: the exported size in bytes.")                               \
  X (U64, slots, GAUGE, "thin_slots", NULL, 1,                               \
     "Thin mode: physical slots in the pool.")                               \
  X (U64, trims, COUNTER, "thin_trims_total", NULL, 1,                       \
     "Thin mode: TRIM requests received from the client.")                   \
  X (U64, trim_bytes, COUNTER, "thin_trim_bytes_total", NULL, 1,             \
     "Thin mode: bytes in the client's TRIM requests.")                      \
  X (U64, mapped, GAUGE, "thin_slots_mapped", NULL, 1,                       \
     "Thin mode: slots mapped.")                                             \
  X (U64, mapped_runs, GAUGE, "thin_runs_mapped", NULL, 1,                   \
     "Thin mode: runs of mapped slots (logically and physically "            \
     "consecutive).")                                                        \
  X (U64, free_clean, GAUGE, "thin_slots_free", "state=\"clean\"", 1,        \
     "Thin mode: free slots, by state.")                                     \
  X (U64, free_clean_runs, GAUGE, "thin_runs_free", "state=\"clean\"", 1,    \
     "Thin mode: runs of free slots, by state.")                             \
  X (U64, free_zero, GAUGE, "thin_slots_free_zero", NULL, 1,                 \
     "Thin mode: clean free slots known to read as zeros.")                  \
  X (U64, free_pending, GAUGE, "thin_slots_free",                            \
     "state=\"pending_discard\"", 1,                                         \
     "Thin mode: free slots whose discard may be pending.")                  \
  X (U64, free_pending_runs, GAUGE, "thin_runs_free",                        \
     "state=\"pending_discard\"", 1,                                         \
     "Thin mode: runs of free slots whose discard may be pending.")          \
  X (U64, free_pending_largest, GAUGE, "thin_largest_run_free_slots",        \
     "state=\"pending_discard\"", 1,                                         \
     "Thin mode: the largest run of free slots whose discard may be "        \
     "pending.")                                                             \
  X (U64, free_undurable, GAUGE, "thin_slots_free",                          \
     "state=\"awaiting_commit\"", 1,                                         \
     "Thin mode: slots unmapped, the unmap not yet durable.")                \
  X (U64, reserve_limit, GAUGE, "thin_reserve_limit_bytes", NULL, 1,      \
     "Thin mode: the reuse reserve's size (reserve=).")                      \
  X (U64, reserve_bytes, GAUGE, "thin_reserve_bytes", NULL, 1,               \
     "Thin mode: bytes of freed slots kept undiscarded for reuse.")          \
  X (U64, reserve_runs, GAUGE, "thin_reserve_runs", NULL, 1,                 \
     "Thin mode: runs of freed slots kept undiscarded for reuse.")           \
  X (U64, reserve_writes, COUNTER, "thin_reserve_writes_total", NULL, 1,     \
     "Thin mode: writes served from the reuse reserve.")                     \
  X (U64, discards_avoided, COUNTER, "thin_discards_avoided_total", NULL, 1, \
     "Thin mode: reserve runs reused with no discard ever sent.")            \
  X (U64, discards_avoided_bytes, COUNTER,                                   \
     "thin_discards_avoided_bytes_total", NULL, 1,                           \
     "Thin mode: bytes of reserve runs reused with no discard ever sent.")   \
  X (U64, reserve_released, COUNTER, "thin_reserve_released_total", NULL, 1, \
     "Thin mode: reserve runs discarded (past the reserve, on request or "   \
     "under space pressure).")                                               \
  X (U64, reserve_released_bytes, COUNTER,                                   \
     "thin_reserve_released_bytes_total", NULL, 1,                           \
     "Thin mode: bytes of reserve runs discarded.")                          \
  X (U64, allocated, COUNTER, "thin_allocated_total", NULL, 1,               \
     "Thin mode: slots allocated.")                                          \
  X (U64, reused, COUNTER, "thin_reused_total", NULL, 1,                     \
     "Thin mode: slots reused while their discard was pending.")             \
  X (U64, enospc, COUNTER, "thin_enospc_total", NULL, 1,                     \
     "Thin mode: writes failed for want of a free slot.")                    \
  X (U64, zero_fills, COUNTER, "thin_zero_fills_total", NULL, 1,             \
     "Thin mode: zero requests filling the uncovered part of a new slot.")   \
  X (U64, map_bytes, GAUGE, "thin_map_bytes", NULL, 1,                       \
     "Thin mode: memory of the map of runs.")                                \
  X (U64, memory_bytes, GAUGE, "thin_memory_bytes", NULL, 1,                 \
     "Thin mode: memory of the map and the free space maps.")                \
  X (U64, commits, COUNTER, "thin_commits_total", NULL, 1,                   \
     "Thin mode: journal commits.")                                          \
  X (U64, journal_bytes, GAUGE, "thin_journal_bytes", NULL, 1,               \
     "Thin mode: size of the meta file.")                                    \
  X (U64, checkpoints, COUNTER, "thin_checkpoints_total", NULL, 1,           \
     "Thin mode: checkpoints written.")                                      \
  X (U64, last_checkpoint, GAUGE, "thin_last_checkpoint_timestamp_seconds",  \
     NULL, 1,                                                                \
     "Thin mode: unix time of the last checkpoint (0: none yet).")

#endif /* DISCARDCACHE_THIN_STATS_H */
