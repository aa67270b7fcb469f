/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the small-extent policy (small=).  On a device where
 * each discard command costs milliseconds whatever its size (a SATA
 * SSD's non-queued TRIM), a file system whose TRIMs are acknowledged at
 * once leaves thousands of small pending extents between live blocks,
 * and sending each costs the device a command.  Extents shorter than
 * the threshold are held: the flusher does not forward them (they wait
 * to merge with neighbours), an explicit flush does, and a stop saves
 * them to state= or leaves them, counted (docs/design-notes.md,
 * "Small extents").  Pure functions here, on the cost model that
 * pacing.h fits; the engine applies them (cache/engine/engine-small.c).
 */
#ifndef DISCARDCACHE_SMALL_H
#define DISCARDCACHE_SMALL_H

#include <stdbool.h>
#include <stdint.h>

#include "pacing.h"

/* small=auto holds nothing until this many discards were measured ... */
#define SMALL_AUTO_MIN_SAMPLES 8
/* ... nor where a command costs less than this (us): such a device does
 * not care how many it gets.  Below the 5 ms of issue 23's device model
 * (and the tens of ms of a SATA SSD's non-queued TRIM), above the 2.8 ms
 * a sparse file's hole punch took on a 2-core machine at a load of 10,
 * so that a busy host does not make a file backend hold its extents.
 */
#define SMALL_AUTO_MIN_COST_US 4000.0
/* ... and never extents of this size or more.  ZFS skips discards
 * under 32 KiB and btrfs's async discard filters at 32 KiB, both
 * forgetting what they skip; a held extent is not forgotten (it merges,
 * goes out with an explicit flush, or is saved to state=), so twice
 * that.
 */
#define SMALL_AUTO_MAX (64 * 1024)

/* small=auto's threshold for the cost model m: where the per-command
 * cost a exceeds the per-byte cost of the whole extent (length < a/b:
 * the command, not the bytes, is what the device pays for), up to
 * SMALL_AUTO_MAX, rounded down to a power of two (so that it moves
 * rarely: each change walks the extent map) and at least granularity.
 * 0 (hold nothing) while the model has fewer than SMALL_AUTO_MIN_SAMPLES
 * or a is under SMALL_AUTO_MIN_COST_US.
 */
extern uint64_t small_auto_threshold (const struct pace_model *m,
                                      uint64_t granularity)
  __attribute__ ((nonnull (1)));

/* Whether a join of two pending extents across a known-clean gap of gap
 * bytes costs the device less than the command it saves: b * gap < a,
 * by the model.  False without a model of SMALL_AUTO_MIN_SAMPLES, and
 * where a command costs under SMALL_AUTO_MIN_COST_US: there a command
 * saved is worth less than discard once (invariant 9), which a join
 * gives up for the gap (an fstrim after a crash would otherwise send
 * known-clean space again).
 */
extern bool small_join_pays (const struct pace_model *m, uint64_t gap)
  __attribute__ ((nonnull (1)));

#endif /* DISCARDCACHE_SMALL_H */
