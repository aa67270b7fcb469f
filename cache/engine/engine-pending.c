/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the pending set, the engine's one map of discards
 * received and not yet sent.  What changes it from the data path: a TRIM
 * recorded (less what is known clean, invariant 9), a write or zero
 * cancelling what it overlaps (invariant 1), the memory bound
 * (invariant 3) and a drain (invariant 2); and the clock its extents are
 * stamped with.  The flusher, the journal and the state file change it
 * through these too, so nothing in cache/ calls back into engine.c.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"
#include "policy.h"
#include "verify.h"

/* Rebase the extent map's 32-bit millisecond ticks well before they
 * wrap (2^31 ms is about 24 days).
 */
#define TICKS_REBASE_AT (UINT32_C (1) << 31)
#define TICKS_REBASE_BY (UINT32_C (1) << 30)

uint32_t
engine_ticks_locked (struct engine *e)
  REQUIRES (engine_lock)
{
  uint64_t ticks;

  DEBUG_VERIFY_HELD (&e->lock);
  ticks = engine_now_ms (e) - e->epoch_ms;

  if (ticks >= TICKS_REBASE_AT) {
    e->epoch_ms += TICKS_REBASE_BY;
    extmap_rebase_time (e->map, TICKS_REBASE_BY);
    ticks -= TICKS_REBASE_BY;
  }
  return (uint32_t) ticks;
}

/* Without memory to split an extent, cancel every overlapping extent
 * whole: removing whole extents never allocates.  The bytes outside the
 * request are counted as dropped.
 */
static void
cancel_whole_extents_locked (struct engine *e, uint64_t offset,
                             uint64_t length, uint64_t *cancelled)
  REQUIRES (engine_lock)
{
  struct extent x;

  while (extmap_find_overlap (e->map, offset, length, &x)) {
    uint64_t start = MAX (x.offset, offset);
    uint64_t end = MIN (x.offset + x.length, offset + length);

    extmap_remove (e->map, x.offset, x.length, NULL);
    *cancelled += end - start;
    e->stats.dropped++;
    e->stats.dropped_bytes += x.length - (end - start);
    e->stats.dropped_nomem_bytes += x.length - (end - start);
  }
}

/* Invariant 1: remove pending discards under [offset, offset+length) and
 * wait out any overlapping discard in flight.  A discard that fails goes
 * back into the map before it leaves the in-flight list, so the loop
 * removes it again.  Invariant 9: in the same step the range stops being
 * known clean; a discard in flight that succeeds marks its range clean
 * before it leaves the list, so the loop takes that out again too.
 */
bool
engine_cancel_pending (struct engine *e, uint64_t offset, uint64_t length,
                       uint64_t *cancelled)
{
  bool changed = false;

  engine_lock_acquire (e);
  for (;;) {
    uint64_t removed = 0, before = *cancelled;

    if (extmap_remove (e->map, offset, length, &removed) == 0)
      *cancelled += removed;
    else
      cancel_whole_extents_locked (e, offset, length, cancelled);
    changed |= *cancelled != before;
    changed |= clean_written (&e->clean, offset, length);
    if (!engine_overlaps_inflight_locked (e, offset, length))
      break;
    e->stats.write_waits++;
    engine_cond_wait_drops_lock (e, &e->inflight_done);
  }
  /* Invariant 1, what the write may now rely on: nothing of its range is
   * pending (so none of it can be sent later) or in flight.
   */
  DEBUG_VERIFY (!extmap_find_overlap (e->map, offset, length,
                                      &(struct extent) { 0 }));
  engine_lock_release (e);
  return changed;
}

/* Keep max-extents: forward (or drop, by policy) the oldest extents.
 * Each turn removes one whole extent; its sub-granule head and tail
 * cannot be sent alone, so at the bound they are dropped and counted.
 */
void
engine_enforce_bound_drops_lock (struct engine *e)
  REQUIRES (engine_lock)
{
  struct extent x;
  uint64_t aoff, alen;

  DEBUG_VERIFY_HELD (&e->lock);
  while (extmap_count (e->map) > e->cfg.max_extents &&
         extmap_oldest (e->map, &x)) {
    extmap_remove (e->map, x.offset, x.length, NULL);
    if (e->cfg.on_full == ON_FULL_DROP || e->forwarding_disabled) {
      e->stats.dropped++;
      e->stats.dropped_bytes += x.length;
      e->stats.dropped_full_bytes += x.length;
      continue;
    }
    /* Invariant 11: an open breaker is not overridden by the bound; the
     * oldest extent goes, counted (docs/design-notes.md says why).
     */
    if (breaker_holds (&e->breaker)) {
      e->stats.dropped++;
      e->stats.dropped_bytes += x.length;
      e->stats.dropped_breaker_bytes += x.length;
      continue;
    }
    if (!policy_aligned_part (x.offset, x.length, e->fwd_granularity,
                              &aoff, &alen))
      alen = 0;
    if (alen < x.length) {
      e->stats.dropped++;
      e->stats.dropped_bytes += x.length - alen;
      e->stats.dropped_fragment_bytes += x.length - alen;
    }
    if (alen)
      engine_forward_drops_lock (e, aoff, alen, x.time, false, false);
  }
  /* Invariant 3.  The loop ends holding the lock, with the count it
   * last read; removing a whole extent never fails.
   */
  VERIFY3U (extmap_count (e->map), <=, e->cfg.max_extents);
}

/* Queue [offset, offset+length) as pending.  May drop the lock (to
 * forward at the bound, or without memory to remember it).
 */
static void
record_range_drops_lock (struct engine *e, uint64_t offset, uint64_t length)
  REQUIRES (engine_lock)
{
  size_t before = extmap_count (e->map);

  if (extmap_insert (e->map, offset, length, engine_ticks_locked (e)) == -1) {
    if (breaker_holds (&e->breaker)) {
      e->stats.dropped++;
      e->stats.dropped_bytes += length;
      e->stats.dropped_nomem_bytes += length;
      return;
    }
    /* No memory to remember it: send it now rather than forget it. */
    engine_forward_drops_lock (e, offset, length, engine_ticks_locked (e),
                               false, false);
    return;
  }
  e->stats.merges += before + 1 - extmap_count (e->map);
  engine_enforce_bound_drops_lock (e);
}

/* Invariant 9: the parts of a TRIM that are known clean are counted,
 * not recorded; the rest is queued.  Recording may drop the lock, so
 * the clean map is asked again after each piece.
 */
void
engine_record_trim_drops_lock (struct engine *e, uint64_t offset, uint64_t length)
  REQUIRES (engine_lock)
{
  uint64_t pos = offset, end = offset + length, start, stop;
  bool recorded = false;

  DEBUG_VERIFY_HELD (&e->lock);
  /* The front-ends checked the range against the size they export. */
  VERIFY3U (end, >=, offset);
  VERIFY3U (end, <=, backend_size (e->backend));
  while (pos < end) {
    if (!clean_find (&e->clean, pos, end - pos, &start, &stop))
      start = stop = end;
    if (start > pos) {
      record_range_drops_lock (e, pos, start - pos);
      recorded = true;
      pos = start;
      continue;
    }
    e->stats.already_clean_bytes += stop - pos;
    pos = stop;
  }
  if (recorded)
    pthread_cond_signal (&e->wakeup);
}

/* Forward everything forwardable, then wait for discards that others
 * have in flight, so a caller that asked for strictness gets it.
 */
int
engine_drain (struct engine *e, uint64_t *commands, uint64_t *bytes)
{
  uint64_t offset, length, n = 0, total = 0;
  uint32_t time;
  int r = 0;

  engine_lock_acquire (e);
  /* Invariant 11: a client's FLUSH does not override an open breaker;
   * what is pending stays so (a discard is a hint, the flush succeeds).
   */
  while (!e->forwarding_disabled && !breaker_holds (&e->breaker) &&
         engine_pick_locked (e, UINT32_MAX, 0, &offset, &length, &time)) {
    engine_join_clean_locked (e, &offset, &length);
    if (engine_forward_drops_lock (e, offset, length, time, false,
                                   true) == -1) {
      if (errno != EOPNOTSUPP && errno != ENOTSUP) {
        dc_error ("discard of [%" PRIu64 ", +%" PRIu64 ") failed: %m "
                  "(kept pending, retried later)", offset, length);
        r = -1;
      }
      break;
    }
    n++;
    total += length;
  }
  while (r == 0 && e->inflight != NULL)
    engine_cond_wait_drops_lock (e, &e->inflight_done);
  engine_lock_release (e);
  if (commands)
    *commands = n;
  if (bytes)
    *bytes = total;
  return r;
}
