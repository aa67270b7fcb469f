/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: sending discards to the backend, and the in-flight list
 * that makes writes wait for a discard they overlap (invariant 1).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"
#include "policy.h"

/* Backoff after a failed discard: doubling from 10 ms to 30 s, reset
 * by the first success.  The short first step matters when errors are
 * sporadic (a busy device, one bad request): each failure delays every
 * pending discard, and at a stop with a deadline a 100 ms first step
 * left a quarter-failing backend with hundreds of extents unsent.  A
 * device that keeps failing still reaches the 30 s step after a dozen
 * failures.
 */
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 30000

bool
engine_overlaps_inflight_locked (const struct engine *e, uint64_t offset,
                                 uint64_t length)
{
  for (const struct inflight *f = e->inflight; f != NULL; f = f->next)
    if (offset < f->offset + f->length && f->offset < offset + length)
      return true;
  return false;
}

static void
inflight_remove (struct engine *e, struct inflight *entry)
{
  for (struct inflight **p = &e->inflight; *p != NULL; p = &(*p)->next) {
    if (*p == entry) {
      *p = entry->next;
      return;
    }
  }
}

void
engine_drop_all_locked (struct engine *e)
{
  size_t n = extmap_count (e->map);
  uint64_t bytes = extmap_bytes (e->map);

  e->stats.dropped += n;
  e->stats.dropped_bytes += bytes;
  e->stats.dropped_unsupported_bytes += bytes;
  extmap_clear (e->map);
}

/* EOPNOTSUPP: the backend cannot discard at all.  Forwarding stops for
 * good and what is pending is dropped, counted, like the seed's "TRIM not
 * supported".
 */
static void
disable_forwarding_locked (struct engine *e)
{
  if (!e->forwarding_disabled)
    dc_error ("backend %s does not support discard: forwarding turned off, "
              "pending discards dropped", e->backend->identity.name);
  e->forwarding_disabled = true;
  engine_drop_all_locked (e);
}

/* A transient error: keep the unsent part pending and back off. */
static void
keep_pending_locked (struct engine *e, uint64_t offset, uint64_t length,
                     uint32_t time, int err)
{
  e->stats.forward_errors++;
  e->stats.last_error = err;
  e->backoff_ms = e->backoff_ms == 0 ? BACKOFF_MIN_MS
                                     : MIN (e->backoff_ms * 2, BACKOFF_MAX_MS);
  e->retry_at_ms = engine_now_ms () + e->backoff_ms;
  if (extmap_insert (e->map, offset, length, time) == -1) {
    e->stats.dropped++;
    e->stats.dropped_bytes += length;
    e->stats.dropped_nomem_bytes += length;
  }
}

/* A failed range that cannot go back (at the memory bound) or that
 * would only fail again (EINVAL: the store refuses the request as such,
 * retrying cannot help) is counted as dropped.
 */
static void
drop_after_error_locked (struct engine *e, uint64_t length, int err)
{
  e->stats.forward_errors++;
  e->stats.last_error = err;
  e->stats.dropped++;
  e->stats.dropped_bytes += length;
  e->stats.dropped_error_bytes += length;
}

/* One discard command, timed for the cost model; while it runs, client
 * requests see discards_inflight and discard_events change.
 */
static int
send_one (struct engine *e, uint64_t offset, uint64_t n, bool fua)
{
  struct backend *b = e->backend;
  uint64_t t0;
  int r, err;

  atomic_fetch_add (&e->discard_events, 1);
  atomic_fetch_add (&e->discards_inflight, 1);
  t0 = engine_now_ns ();
  r = b->ops->discard (b, offset, n, fua);
  err = errno;
  t0 = engine_now_ns () - t0;
  atomic_fetch_sub (&e->discards_inflight, 1);
  atomic_fetch_add (&e->discard_events, 1);
  if (r == 0) {
    pthread_mutex_lock (&e->lock);
    pace_meter_discard (&e->pace, n, t0 / 1000);
    pthread_mutex_unlock (&e->lock);
  }
  errno = err;
  return r;
}

/* Send the chunks without the lock, counting the commands and bytes
 * that went out before any error.
 */
static int
send_chunks (struct engine *e, uint64_t offset, uint64_t length, bool fua,
             uint64_t *commands, uint64_t *sent)
{
  *commands = *sent = 0;
  while (*sent < length) {
    uint64_t n = MIN (length - *sent, e->chunk_limit);

    if (send_one (e, offset + *sent, n, fua) == -1)
      return -1;
    (*commands)++;
    *sent += n;
  }
  return 0;
}

int
engine_forward_locked (struct engine *e, uint64_t offset, uint64_t length,
                       uint32_t time, bool fua, bool keep_on_error)
{
  struct inflight entry = { .offset = offset, .length = length };
  uint64_t commands, sent;
  int r, err;

  if (e->forwarding_disabled) {
    e->stats.dropped++;
    e->stats.dropped_bytes += length;
    e->stats.dropped_unsupported_bytes += length;
    return 0;
  }
  entry.next = e->inflight;
  e->inflight = &entry;
  e->stats.inflight++;
  e->stats.inflight_bytes += length;

  pthread_mutex_unlock (&e->lock);
  r = send_chunks (e, offset, length, fua, &commands, &sent);
  err = errno;
  pthread_mutex_lock (&e->lock);

  e->stats.inflight--;
  e->stats.inflight_bytes -= length;
  e->stats.forwarded += commands;
  e->stats.forwarded_bytes += sent;
  /* Invariant 9: what went out is clean, marked before the entry leaves
   * the in-flight list, so a write that waited for it takes it out again.
   */
  clean_discarded (&e->clean, offset, sent);
  if (r == -1) {
    if (err == EOPNOTSUPP || err == ENOTSUP) {
      disable_forwarding_locked (e);
      e->stats.dropped++;
      e->stats.dropped_bytes += length - sent;
      e->stats.dropped_unsupported_bytes += length - sent;
    }
    else if (keep_on_error && err != EINVAL)
      keep_pending_locked (e, offset + sent, length - sent, time, err);
    else
      drop_after_error_locked (e, length - sent, err);
  }
  else
    e->backoff_ms = 0;
  /* Re-inserting (above) happens before waiting writers wake, so a write
   * that waited still finds and cancels the range it overlaps.
   */
  inflight_remove (e, &entry);
  pthread_cond_broadcast (&e->inflight_done);
  errno = err;
  return r;
}

/* Sweep in address order for the first eligible extent with a whole
 * granule inside: used only when the largest eligible extent, at least
 * a granule long but under two, straddles a granule boundary, so that a
 * shorter one placed better may still hold a whole granule.
 */
struct sweep {
  uint32_t cutoff;
  uint64_t minlen;
  uint64_t granularity;
  struct extent found;
};

static int
sweep_visit (const struct extent *x, void *opaque)
{
  struct sweep *s = opaque;
  uint64_t aoff, alen;

  if (x->time > s->cutoff || x->length < s->minlen)
    return 0;
  if (!policy_aligned_part (x->offset, x->length, s->granularity, &aoff, &alen))
    return 0;
  s->found = *x;
  return 1;
}

bool
engine_pick_locked (struct engine *e, uint32_t cutoff, uint64_t minlen,
                    uint64_t *offset, uint64_t *length, uint32_t *time)
{
  return engine_pick_max_locked (e, cutoff, minlen, e->chunk_limit,
                                 offset, length, time);
}

bool
engine_pick_max_locked (struct engine *e, uint32_t cutoff, uint64_t minlen,
                        uint64_t max_length, uint64_t *offset,
                        uint64_t *length, uint32_t *time)
{
  struct extent x;
  uint64_t aoff, alen;

  if (!extmap_largest_before (e->map, cutoff, &x) || x.length < minlen)
    return false;
  if (!policy_aligned_part (x.offset, x.length, e->granularity, &aoff, &alen)) {
    struct sweep s = { .cutoff = cutoff, .minlen = minlen,
                       .granularity = e->granularity };

    /* No eligible extent is longer than x: under a granule, none holds a
     * whole one, and a sweep over a map of fragments would hold the lock
     * through every one of them for nothing, at every trim that wakes
     * the flusher.
     */
    if (x.length < e->granularity)
      return false;
    if (extmap_iterate (e->map, 0, sweep_visit, &s) == 0)
      return false;
    x = s.found;
    policy_aligned_part (x.offset, x.length, e->granularity, &aoff, &alen);
  }
  /* Several chunks in one pick keep the in-flight list short; the
   * flusher re-checks idleness between picks, so bound it to one chunk
   * (or less: the pacing's batch size).
   */
  alen = MIN (alen, MIN (max_length, e->chunk_limit));
  /* Removing a range inside one extent may split it and need a node;
   * on ENOMEM nothing is picked now and the flusher tries again later.
   */
  if (extmap_remove (e->map, aoff, alen, NULL) == -1)
    return false;
  *offset = aoff;
  *length = alen;
  *time = x.time;
  return true;
}
