/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the engine's admin side (see engine.h): what the
 * control socket and a stop ask of a running engine, beside the data
 * path: forget the known-clean map, pause the
 * flusher, change a runtime key, copy the pending extents out in
 * batches, and one snapshot of the statistics.  Each takes the engine
 * lock itself; none is called on a client's request path.  (Draining
 * everything now, which a client's FLUSH runs with flush-discards=true,
 * is the pending set's: engine-pending.c.)
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"

void
engine_forget_clean (struct engine *e, uint64_t *extents, uint64_t *bytes)
{
  engine_lock_acquire (e);
  clean_forget_all (&e->clean, extents, bytes);
  engine_lock_release (e);
}

void
engine_pause (struct engine *e, bool paused)
{
  engine_lock_acquire (e);
  e->paused = paused;
  if (!paused)
    breaker_close (&e->breaker);
  pthread_cond_broadcast (&e->wakeup);
  engine_lock_release (e);
}

int
engine_set (struct engine *e, const char *key, const char *value)
{
  int r;

  if (!engine_config_key_is_runtime (key)) {
    dc_error ("%s: cannot be changed while running: the runtime keys are "
              "%s", key, engine_config_runtime_keys);
    errno = EINVAL;
    return -1;
  }
  engine_lock_acquire (e);
  r = engine_config_set (&e->cfg, key, value);
  /* Which extents are forwardable: one walk of the map, under the lock
   * (a rare command; the flusher's wake-up depends on it).
   */
  if (r == 0 && strcmp (key, "minlen") == 0)
    extmap_set_minlen (e->map, engine_flusher_minlen_locked (e));
  pthread_cond_broadcast (&e->wakeup);
  engine_lock_release (e);
  return r;
}

struct dump_batch {
  struct extent *out;
  size_t max;
  size_t n;
};

static int
dump_visit (const struct extent *x, void *opaque)
{
  struct dump_batch *d = opaque;

  d->out[d->n++] = *x;
  return d->n == d->max;
}

size_t
engine_dump_batch (struct engine *e, uint64_t from, struct extent *out,
                   size_t max, uint32_t *now_ticks)
{
  struct dump_batch d = { .out = out, .max = max };

  engine_lock_acquire (e);
  *now_ticks = engine_ticks_locked (e);
  if (max > 0)
    extmap_iterate (e->map, from, dump_visit, &d);
  engine_lock_release (e);
  return d.n;
}

/* How old the backend's background readings are, and why the last one
 * failed, where it reads them so (invariant 14: the control socket never
 * waits on the backend, so it shows their age instead).
 */
static void
readings_stats (struct engine *e, struct engine_stats *st)
{
  struct backend_readings r;

  if (backend_readings (e->backend, &r) == -1)
    return;
  st->backend_allocated_age_ms = (int) MIN (r.allocated_age_ms, INT32_MAX);
  st->backend_allocated_error = r.allocated_error;
  st->backend_free_age_ms = (int) MIN (r.free_age_ms, INT32_MAX);
  st->backend_free_error = r.free_error;
}

/* O(1): the map keeps its totals as extents come and go, so polling
 * the statistics never walks it.
 */
void
engine_get_stats (struct engine *e, struct engine_stats *st)
{
  engine_lock_acquire (e);
  *st = e->stats;
  st->pending_extents = extmap_count (e->map);
  st->pending_bytes = extmap_bytes (e->map);
  st->subgranule_bytes = extmap_subgranule_bytes (e->map);
  st->memory_bytes = extmap_memory (e->map);
  st->discard_supported = !e->forwarding_disabled;
  st->paused = e->paused;
  st->granularity = e->fwd_granularity;
  st->max_discard = e->chunk_limit;
  st->max_extents = e->cfg.max_extents;
  st->small_len = e->small_len;
  st->clean_extents = clean_extents (&e->clean);
  st->clean_bytes = clean_bytes (&e->clean);
  st->clean_memory_bytes = clean_memory (&e->clean);
  st->clean_forgotten_bytes = e->clean.forgotten_bytes;
  st->max_clean_extents = e->clean.max_extents;
  engine_pace_stats_locked (e, st);
  engine_protection_stats_locked (e, st);
  engine_pressure_stats_locked (e, st);
  engine_journal_stats (e, st);
  engine_lock_release (e);
  /* Outside the lock: it may cost a walk of the store's metadata (at
   * most once per the backend's interval), never a request's wait.
   */
  if (backend_allocated (e->backend, &st->backend_allocated_bytes) == -1)
    st->backend_allocated_bytes = 0;
  readings_stats (e, st);
}
