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
#include "verify.h"

/* Backoff after a failed discard: doubling from 10 ms to 30 s, reset
 * by the first success.  The short first step matters when errors are
 * sporadic (a busy device, one bad request): each failure delays every
 * pending discard, and at a stop with a deadline a 100 ms first step
 * left a quarter-failing backend with hundreds of extents unsent.  A
 * device that keeps failing still reaches the 30 s step after a dozen
 * failures.
 */
#define BACKOFF_MIN_MS UINT64_C (10)
#define BACKOFF_MAX_MS UINT64_C (30000)

bool
engine_overlaps_inflight_locked (const struct engine *e, uint64_t offset,
                                 uint64_t length)
  REQUIRES (engine_lock)
{
  DEBUG_VERIFY_HELD ((pthread_mutex_t *) &e->lock);
  for (const struct inflight *f = e->inflight; f != NULL; f = f->next)
    if (offset < f->offset + f->length && f->offset < offset + length)
      return true;
  return false;
}

static void
inflight_remove_locked (struct engine *e, struct inflight *entry)
  REQUIRES (engine_lock)
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
  REQUIRES (engine_lock)
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
  REQUIRES (engine_lock)
{
  if (!e->forwarding_disabled)
    dc_error ("backend %s does not support discard: forwarding turned off, "
              "pending discards dropped", backend_identity (e->backend)->name);
  e->forwarding_disabled = true;
  engine_drop_all_locked (e);
}

/* A transient error: keep the unsent part pending and back off. */
static void
keep_pending_locked (struct engine *e, uint64_t offset, uint64_t length,
                     uint32_t time, int err)
  REQUIRES (engine_lock)
{
  e->stats.forward_errors++;
  e->stats.last_error = err;
  e->backoff_ms = e->backoff_ms == 0 ? BACKOFF_MIN_MS
                                     : MIN (e->backoff_ms * 2, BACKOFF_MAX_MS);
  e->retry_at_ms = engine_now_ms (e) + e->backoff_ms;
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
  REQUIRES (engine_lock)
{
  e->stats.forward_errors++;
  e->stats.last_error = err;
  e->stats.dropped++;
  e->stats.dropped_bytes += length;
  e->stats.dropped_error_bytes += length;
}

/* Whether a failed discard says the device is in trouble (the circuit
 * breaker counts it): not EOPNOTSUPP or EINVAL, which are about the
 * request.
 */
static bool
device_error (int err)
{
  return err != EOPNOTSUPP && err != ENOTSUP && err != EINVAL;
}

/* One discard command, timed for the cost model and the circuit
 * breaker; while it runs, client requests see discards_inflight and
 * discard_events change.
 */
static int
send_one (struct engine *e, uint64_t offset, uint64_t n, bool fua, bool probe)
  EXCLUDES (engine_lock)
{
  struct backend *b = e->backend;
  uint64_t t0, t1;
  int r, err;

  atomic_fetch_add (&e->discard_events, 1);
  atomic_fetch_add (&e->discards_inflight, 1);
  t0 = engine_now_ns (e);
  r = backend_discard (b, offset, n, fua);
  err = errno;
  t1 = engine_now_ns (e);
  atomic_fetch_sub (&e->discards_inflight, 1);
  atomic_fetch_add (&e->discard_events, 1);
  /* A probe always reports, or the breaker would wait for it forever:
   * an answer about the request (EINVAL) says the device is alive.
   */
  if (r == 0 || device_error (err) || probe) {
    engine_lock_acquire (e);
    if (r == 0)
      pace_meter_discard (&e->pace, n, (t1 - t0) / 1000);
    breaker_record (&e->breaker, &engine_keys (e)->breaker, t0, t1,
                    r == 0 || !device_error (err) ? 0 : err, probe);
    engine_lock_release (e);
  }
  errno = err;
  return r;
}

/* Send the chunks without the lock, counting the commands and bytes
 * that went out before any error.
 */
static int
send_chunks (struct engine *e, uint64_t offset, uint64_t length, bool fua,
             bool probe, uint64_t *commands, uint64_t *sent)
  EXCLUDES (engine_lock)
{
  *commands = *sent = 0;
  while (*sent < length) {
    uint64_t n = MIN (length - *sent, e->chunk_limit);

    if (send_one (e, offset + *sent, n, fua, probe) == -1)
      return -1;
    (*commands)++;
    *sent += n;
  }
  return 0;
}

static int
forward_drops_lock (struct engine *e, uint64_t offset, uint64_t length,
                    uint32_t time, bool fua, bool keep_on_error, bool probe)
  REQUIRES (engine_lock)
{
  struct inflight entry = { .offset = offset, .length = length };
  uint64_t commands, sent, epoch, end;
  bool wraps = ADD_OVERFLOW (offset, length, &end);
  int r, err;

  DEBUG_VERIFY_HELD (&e->lock);
  /* What goes out is a range of the store: the backend would refuse
   * anything else, and the range would be dropped, counted, as an error.
   */
  VERIFY3U (length, >, 0);
  VERIFY (!wraps);
  VERIFY3U (end, <=, backend_size (e->backend));
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
  epoch = e->epoch_ms;

  engine_lock_release (e);
  r = send_chunks (e, offset, length, fua, probe, &commands, &sent);
  err = errno;
  engine_lock_acquire (e);

  /* The ticks were rebased while the lock was down: what goes back
   * into the map must be in the new epoch, as the map's extents are
   * (else it would look younger by the rebase, about 12 days).
   */
  time = time > e->epoch_ms - epoch ? time - (uint32_t) (e->epoch_ms - epoch)
                                    : 0;

  VERIFY3U (sent, <=, length);
  VERIFY3U (e->stats.inflight_bytes, >=, length);
  e->stats.inflight--;
  e->stats.inflight_bytes -= length;
  e->stats.forwarded += commands;
  e->stats.forwarded_bytes += sent;
  /* Invariant 9: what went out is clean, marked before the entry leaves
   * the in-flight list, so a write that waited for it takes it out again.
   */
  clean_discarded (&e->clean, offset, sent);
  if (sent > 0)
    proof_offer (&e->proof, offset, sent, e->fwd_granularity);
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
  inflight_remove_locked (e, &entry);
  pthread_cond_broadcast (&e->inflight_done);
  errno = err;
  return r;
}

int
engine_forward_drops_lock (struct engine *e, uint64_t offset,
                           uint64_t length, uint32_t time, bool fua,
                           bool keep_on_error)
  REQUIRES (engine_lock)
{
  return forward_drops_lock (e, offset, length, time, fua, keep_on_error,
                             false);
}

int
engine_probe_drops_lock (struct engine *e, uint64_t offset, uint64_t length,
                         uint32_t time)
  REQUIRES (engine_lock)
{
  if (!e->forwarding_disabled)
    breaker_probe_begin (&e->breaker);
  return forward_drops_lock (e, offset, length, time, false, true,
                             !e->forwarding_disabled);
}

bool
engine_pick_locked (struct engine *e, uint32_t cutoff, uint64_t minlen,
                    uint64_t *offset, uint64_t *length, uint32_t *time)
  REQUIRES (engine_lock)
{
  return engine_pick_max_locked (e, cutoff, minlen, e->chunk_limit,
                                 offset, length, time);
}

bool
engine_pick_max_locked (struct engine *e, uint32_t cutoff, uint64_t minlen,
                        uint64_t max_length, uint64_t *offset,
                        uint64_t *length, uint32_t *time)
  REQUIRES (engine_lock)
{
  struct extent x;
  uint64_t aoff, alen;
  bool whole;

  DEBUG_VERIFY_HELD (&e->lock);
  /* The map answers with an extent that holds a whole granule, in
   * O(height) in the common case: fragments never make it walk them.
   */
  if (!extmap_largest_aligned_before (e->map, cutoff, minlen, &x))
    return false;
  /* The map counts granules of fwd_granularity (engine-proof.c keeps
   * them in step), so the extent it found holds one.
   */
  whole = policy_aligned_part (x.offset, x.length, e->fwd_granularity,
                               &aoff, &alen);
  VERIFY (whole);
  /* Several chunks in one pick keep the in-flight list short; the
   * flusher re-checks idleness between picks, so bound it to one chunk
   * (or less: the pacing's batch size), in whole granules (proof-adapt
   * may have raised them past the chunk's alignment).
   */
  alen = MIN (alen, MIN (max_length, e->chunk_limit));
  alen = MAX (round_down (alen, e->fwd_granularity), e->fwd_granularity);
  /* Removing a range inside one extent may split it and need a node;
   * on ENOMEM nothing is picked now and the flusher tries again later.
   */
  if (extmap_remove (e->map, aoff, alen, NULL) == -1)
    return false;
  /* Invariant 1: the discard sent is part of one received and still
   * pending (so not written since), in whole granules.
   */
  VERIFY3U (aoff, >=, x.offset);
  VERIFY3U (aoff + alen, <=, x.offset + x.length);
  VERIFY3U ((aoff | alen) & (e->fwd_granularity - 1), ==, 0);
  *offset = aoff;
  *length = alen;
  *time = x.time;
  return true;
}
