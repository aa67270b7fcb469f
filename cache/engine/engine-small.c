/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the small-extent policy's place in the engine (its pure
 * rules are policy/small.c): the flusher's forwardable column, an
 * explicit flush's joins across known-clean gaps, and what a stop does
 * with what is pending when no state file takes it.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"
#include "policy.h"
#include "small.h"

uint64_t
engine_small_len_locked (struct engine *e)
  REQUIRES (engine_lock)
{
  struct pace_model m;

  if (!e->cfg.small_auto)
    return e->cfg.small;
  pace_meter_model (&e->pace, &m);
  return small_auto_threshold (&m, e->granularity);
}

uint64_t
engine_flusher_minlen_locked (const struct engine *e)
  REQUIRES (engine_lock)
{
  return MAX (e->cfg.minlen, e->small_len);
}

void
engine_small_apply_locked (struct engine *e)
  REQUIRES (engine_lock)
{
  uint64_t before = engine_flusher_minlen_locked (e);
  uint64_t len = engine_small_len_locked (e);

  if (len != e->small_len)
    dc_debug ("small=%s: pending extents under %" PRIu64 " bytes are held "
              "until they merge or an explicit flush",
              e->cfg.small_auto ? "auto" : "SIZE", len);
  e->small_len = len;
  if (engine_flusher_minlen_locked (e) != before)
    extmap_set_minlen (e->map, engine_flusher_minlen_locked (e));
}

/* Invariant 1: a gap between two pending extents may be discarded only
 * if the backend discarded all of it and nothing has written it since;
 * a write into it while the joined discard is in flight waits for it
 * (it is in the in-flight list whole).  covered: everything in
 * [offset, covered) is pending, known clean, or picked already.
 */
void
engine_join_clean_locked (struct engine *e, uint64_t *offset,
                          uint64_t *length)
  REQUIRES (engine_lock)
{
  struct pace_model m;
  struct extent next;
  uint64_t end = *offset + *length, covered = end, stop, gaps = 0;

  pace_meter_model (&e->pace, &m);
  while (*length < e->chunk_limit &&
         extmap_find_from (e->map, covered, &next)) {
    if (next.offset > covered) {
      if (!small_join_pays (&m, next.offset - covered) ||
          !clean_covers (&e->clean, covered, next.offset - covered))
        break;
      gaps += next.offset - covered;
    }
    covered = next.offset + next.length;
    stop = round_down (MIN (covered, *offset + e->chunk_limit),
                       e->granularity);
    if (stop <= end)
      continue;
    if (extmap_remove (e->map, end, stop - end, NULL) == -1)
      break;
    e->stats.joins++;
    e->stats.joined_clean_bytes += gaps;
    gaps = 0;
    *length = stop - *offset;
    end = stop;
  }
}

struct leftovers {
  uint64_t small_extents, small_bytes;
  uint64_t stop_extents, stop_bytes;
};

/* Give up every pending extent that holds a whole granule, counted by
 * why.  Removing whole extents never allocates; the query skips
 * fragments, which stay pending as after a flush.
 */
static void
drop_leftovers_locked (struct engine *e, uint64_t small_len,
                       struct leftovers *l)
  REQUIRES (engine_lock)
{
  struct extent x;

  while (extmap_largest_aligned_before (e->map, UINT32_MAX, 0, &x)) {
    extmap_remove (e->map, x.offset, x.length, NULL);
    e->stats.dropped++;
    e->stats.dropped_bytes += x.length;
    if (x.length < small_len && !e->forwarding_disabled) {
      l->small_extents++;
      l->small_bytes += x.length;
      e->stats.dropped_small_bytes += x.length;
    }
    else {
      l->stop_extents++;
      l->stop_bytes += x.length;
      e->stats.dropped_stop_bytes += x.length;
    }
  }
}

/* Within the stop's bound, a failed discard or probe is sent again
 * after at most this long, whatever the backoff had grown to.
 */
#define STOP_RETRY_MAX_MS UINT64_C (250)

/* Largest first, so that the device learns of the most free space in
 * the time given; a discard that fails with a transient error went back
 * into the map: wait out the backoff and send it again, as the flusher
 * would have, rather than give up on everything at the first error.
 * The threshold is asked again after each discard: the first ones
 * measure the device when nothing had been forwarded before.
 *
 * The stop is asked for, as a flush is: an open breaker probes now, and
 * again after a failed probe, one at a time, at most STOP_RETRY_MAX_MS
 * apart.  The breaker's own backoff (a second, then doubling) would
 * leave a single probe in the default stop-timeout=, and a backend that
 * came back just after it failed would see everything dropped.
 * stop-timeout= bounds what a device in trouble is asked.
 */
void
engine_stop_forward_drops_lock (struct engine *e, uint64_t deadline)
  REQUIRES (engine_lock)
{
  struct leftovers l = { 0 };
  uint64_t now, offset, length, n = 0, bytes = 0, start = engine_now_ms (e);
  uint32_t time;

  while (!e->forwarding_disabled && (now = engine_now_ms (e)) < deadline) {
    uint64_t wait_until = MIN (e->retry_at_ms, now + STOP_RETRY_MAX_MS);

    engine_breaker_probe_now_locked (e);
    if (now < wait_until) {
      engine_sleep_drops_lock (e, MIN (wait_until, deadline) - now);
      continue;
    }
    if (!engine_pick_max_locked (e, UINT32_MAX, engine_small_len_locked (e),
                                 engine_pick_limit_locked (e),
                                 &offset, &length, &time))
      break;
    if (engine_send_or_probe_drops_lock (e, offset, length, time) == 0) {
      n++;
      bytes += length;
    }
  }
  /* The statistics show the threshold the stop kept. */
  engine_small_apply_locked (e);
  drop_leftovers_locked (e, e->small_len, &l);
  if (n)
    dc_debug ("the stop forwarded %" PRIu64 " discards (%" PRIu64 " bytes) "
              "in %" PRIu64 " ms", n, bytes, engine_now_ms (e) - start);
  if (l.small_extents)
    dc_debug ("at stop, %" PRIu64 " extents (%" PRIu64 " bytes) held by "
              "small= (under %" PRIu64 " bytes) were left unsent, counted in "
              "dropped_small_bytes (set state= to keep them, or run "
              "discardctl flush before stopping)",
              l.small_extents, l.small_bytes, e->small_len);
  if (l.stop_extents)
    dc_error ("at stop, %" PRIu64 " pending extents (%" PRIu64 " bytes) were "
              "not forwarded%s, counted in dropped_stop_bytes",
              l.stop_extents, l.stop_bytes,
              e->forwarding_disabled ? "" : " within stop-timeout=");
}
