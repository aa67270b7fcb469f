/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: engine lifecycle and data path (see engine.h); the
 * admin side (drain, pause, set, dump, statistics) is engine-admin.c.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arith.h"
#include "clock.h"
#include "engine-internal.h"
#include "grow.h"
#include "log.h"
#include "policy.h"

static uint64_t
engine_clock (void *unused)
{
  return monotonic_ns ();
}

/* The user's granularity may coarsen the backend's, never refine it:
 * a discard smaller than the device's granule is not a discard.  auto is
 * the unit the store frees whole when it names one (an RBD object),
 * which granularity= may refine down to the device's granule.
 */
static int
resolve_limits (struct engine *e)
{
  const struct backend_limits *lim = backend_limits (e->backend);
  const struct engine_config *cfg = engine_keys (e);
  uint64_t max_discard = lim->max_discard;

  e->granularity = cfg->granularity ? cfg->granularity
                                      : MAX (lim->discard_granularity,
                                             lim->discard_preferred);
  if (e->granularity < lim->discard_granularity) {
    dc_error ("granularity=%" PRIu64 ": must be at least the backend's "
              "discard granularity, %" PRIu32 " bytes (or auto)",
              e->granularity, lim->discard_granularity);
    errno = EINVAL;
    return -1;
  }
  if (cfg->max_discard) {
    if (cfg->max_discard > max_discard)
      dc_debug ("max-discard=%" PRIu64 " is above the backend's %" PRIu64
                ": using the backend's", cfg->max_discard, max_discard);
    else
      max_discard = cfg->max_discard;
  }
  if (max_discard < e->granularity) {
    /* Name the key the user set: either may be the backend's value. */
    if (cfg->max_discard)
      dc_error ("max-discard=%" PRIu64 ": must be at least the granularity, "
                "%" PRIu64 " bytes", max_discard, e->granularity);
    else
      dc_error ("granularity=%" PRIu64 ": larger than the backend's largest "
                "discard, %" PRIu64 " bytes", e->granularity, max_discard);
    errno = EINVAL;
    return -1;
  }
  e->chunk_limit = policy_chunk_limit (max_discard, e->granularity);
  return 0;
}

static int
init_sync (struct engine *e)
{
  int err = pthread_mutex_init (&e->lock, NULL);

  if (err == 0)
    err = monotonic_cond_init (&e->inflight_done);
  if (err == 0)
    err = monotonic_cond_init (&e->wakeup);
  if (err == 0)
    err = monotonic_cond_init (&e->flushed);
  if (err) {
    errno = err;
    dc_error ("engine: cannot initialise locks: %m");
    return -1;
  }
  return 0;
}

/* state=: the journal and its checkpoint when the journal is on; else
 * the state file alone, once any journal a journal=on run left behind
 * has been dealt with (engine-journal.c).
 */
static int
load_saved (struct engine *e)
{
  int r;

  if (engine_journal_wanted (e))
    return engine_journal_load (e);
  if (!backend_limits (e->backend)->read_only &&
      (r = engine_journal_load_left (e)) != 0)
    return r == 1 ? 0 : -1;
  return engine_state_load (e);
}

struct engine *
engine_open (const struct engine_config *cfg, struct backend *b)
{
  struct engine *e = calloc (1, sizeof *e);

  if (e == NULL) {
    dc_error ("calloc: %m");
    backend_close (b);
    return NULL;
  }
  e->backend = b;
  backend_saved_identity (backend_identity (b), &e->saved_identity);
  if (engine_config_copy (&e->cfg, cfg) == -1) {
    backend_close (b);
    free (e);
    return NULL;
  }
  e->map = extmap_new ();
  if (e->map == NULL) {
    dc_error ("engine: out of memory");
    goto err;
  }
  if (resolve_limits (e) == -1 || engine_pressure_check (e) == -1 ||
      clean_init (&e->clean, engine_keys (e)->passthrough ? 0
                             : engine_keys (e)->max_clean_extents,
                  e->granularity) == -1 ||
      init_sync (e) == -1)
    goto err;
  e->clock = engine_clock;
  /* Nobody else sees the engine yet; the lock is for the analysis. */
  engine_lock_acquire (e);
  /* The map keeps the statistics' granule totals, and which extents
   * the flusher may forward, from now on.
   */
  extmap_set_granularity (e->map, e->granularity);
  extmap_set_minlen (e->map, e->cfg.minlen);
  e->fwd_granularity = e->granularity;
  engine_small_apply_locked (e);
  e->forwarding_disabled = !backend_limits (b)->can_discard;
  engine_protection_init_locked (e);
  e->epoch_ms = engine_now_ms (e);
  atomic_init (&e->active_requests, 0);
  atomic_init (&e->last_request_ms, e->epoch_ms);
  engine_lock_release (e);
  atomic_init (&e->discards_inflight, 0);
  atomic_init (&e->discard_events, 0);
  pace_meter_init (&e->pace, engine_now_ns (e));
  /* Before the first request: invariant 4. */
  if (engine_keys (e)->state && load_saved (e) == -1)
    goto err_sync;
  dc_debug ("engine: backend %s (%s), size %" PRIu64 ", granularity %" PRIu64
            ", max discard %" PRIu64 ", discard %s",
            backend_identity (b)->name, backend_identity (b)->kind, backend_size (b), e->granularity,
            e->chunk_limit,
            backend_limits (b)->can_discard ? "supported" : "unsupported");
  return e;

 err_sync:
  engine_journal_free (e);
  pthread_cond_destroy (&e->flushed);
  pthread_cond_destroy (&e->wakeup);
  pthread_cond_destroy (&e->inflight_done);
  pthread_mutex_destroy (&e->lock);
 err:
  {
    int saved_errno = errno;

    backend_close (e->backend);
    extmap_free (e->map);
    clean_free (&e->clean);
    engine_config_free (&e->cfg);
    free (e);
    errno = saved_errno;
    return NULL;
  }
}

int
engine_start (struct engine *e)
{
  int err;

  if (backend_start (e->backend) == -1)
    return -1;
  err = pthread_create (&e->thread, NULL, engine_flusher_thread, e);
  if (err) {
    errno = err;
    dc_error ("engine: cannot start the flusher thread: %m");
    return -1;
  }
  e->thread_running = true;
  return engine_journal_start (e);
}

/* What the stop left pending, said once and truthfully: saved only
 * when the state file was written with them in it.
 */
static void
log_leftovers (struct engine *e)
{
  struct engine_stats st;

  engine_get_stats (e, &st);
  if (st.pending_extents == 0)
    return;
  if (e->state_saved)
    dc_debug ("at stop, %" PRIu64 " pending extents (%" PRIu64 " bytes) "
              "were saved to %s", st.pending_extents, st.pending_bytes,
              engine_keys (e)->state);
  else if (st.pending_bytes > st.subgranule_bytes)
    dc_error ("at stop, %" PRIu64 " pending extents (%" PRIu64 " bytes) were "
              "not forwarded", st.pending_extents, st.pending_bytes);
  else
    dc_debug ("at stop, %" PRIu64 " sub-granule fragments (%" PRIu64
              " bytes) stay unsent", st.pending_extents, st.pending_bytes);
}

/* Runs once: a second call (engine_close after engine_stop) returns at
 * once, so a failed save is neither retried nor its leftovers logged
 * twice.
 */
void
engine_stop (struct engine *e, uint64_t timeout_ms)
{
  uint64_t deadline = engine_now_ms (e) + timeout_ms;

  if (e->stopped)
    return;
  engine_lock_acquire (e);
  e->stopping = true;
  pthread_cond_broadcast (&e->wakeup);
  pthread_cond_broadcast (&e->flushed);
  engine_lock_release (e);
  if (e->thread_running) {
    pthread_join (e->thread, NULL);
    e->thread_running = false;
  }
  e->stopped = true;

  /* With a state file, what is pending waits for the next start; if it
   * cannot be saved (reported), it is forwarded as without one.
   */
  if (engine_keys (e)->state && !backend_limits (e->backend)->read_only) {
    e->state_saved = engine_state_save (e) == 0;
    if (!e->state_saved)
      dc_error ("state=%s: not saved: forwarding what is pending instead",
                engine_keys (e)->state);
  }
  if (!e->state_saved) {
    engine_lock_acquire (e);
    engine_stop_forward_drops_lock (e, deadline);
    engine_lock_release (e);
  }
  engine_journal_stop (e, e->state_saved);
  log_leftovers (e);
}

void
engine_close (struct engine *e)
{
  if (e == NULL)
    return;
  /* Not stopped yet (a front-end failed between open and start, say):
   * stop now, so that a state file is still written.
   */
  if (!e->stopped && (e->thread_running || engine_keys (e)->state))
    engine_stop (e, 0);
  engine_journal_free (e);
  backend_close (e->backend);
  extmap_free (e->map);
  clean_free (&e->clean);
  pthread_cond_destroy (&e->flushed);
  pthread_cond_destroy (&e->wakeup);
  pthread_cond_destroy (&e->inflight_done);
  pthread_mutex_destroy (&e->lock);
  engine_config_free (&e->cfg);
  free (e);
}

uint64_t
engine_size (const struct engine *e)
{
  return backend_size (e->backend);
}

const struct backend_limits *
engine_limits (const struct engine *e)
{
  return backend_limits (e->backend);
}

const struct backend_identity *
engine_identity (const struct engine *e)
{
  return backend_identity (e->backend);
}

const struct backend_identity *
engine_saved_identity (const struct engine *e)
{
  return &e->saved_identity;
}

uint64_t
engine_granularity (const struct engine *e)
{
  return e->granularity;
}

/* Requests in progress and the end of the last one tell the flusher
 * whether clients are idle.  Data requests (rq not NULL) are also timed
 * for pacing, split by whether a discard was in flight while they ran.
 */
struct request {
  uint64_t start_ns;
  uint64_t discard_events;
  bool discard_inflight;
};

static void
request_begin (struct engine *e, struct request *rq)
{
  atomic_fetch_add (&e->active_requests, 1);
  if (rq) {
    rq->discard_inflight = atomic_load (&e->discards_inflight) > 0;
    rq->discard_events = atomic_load (&e->discard_events);
    rq->start_ns = engine_now_ns (e);
  }
}

static void
request_end (struct engine *e, const struct request *rq)
{
  uint64_t now_ns = engine_now_ns (e);

  /* In flight at either end, or one started or ended between: the two
   * counters are not read at one instant, so each end checks both.
   */
  if (rq)
    pace_meter_client (&e->pace, (now_ns - rq->start_ns) / 1000,
                       rq->discard_inflight ||
                       atomic_load (&e->discards_inflight) > 0 ||
                       atomic_load (&e->discard_events) != rq->discard_events);
  atomic_store (&e->last_request_ms, now_ns / 1000000);
  atomic_fetch_sub (&e->active_requests, 1);
}

static int
check_range (const struct engine *e, uint64_t offset, uint64_t length,
             bool write)
{
  uint64_t end;

  if (write && backend_limits (e->backend)->read_only) {
    errno = EROFS;
    return -1;
  }
  if (length == 0 || ADD_OVERFLOW (offset, length, &end) ||
      end > backend_size (e->backend)) {
    dc_error ("request [%" PRIu64 ", +%" PRIu64 ") is outside the backend "
              "(size %" PRIu64 ")", offset, length, backend_size (e->backend));
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* Ranges of a read that must come back as zeros. */
struct zero_list {
  uint64_t start, end;          /* the read */
  size_t n, cap;
  struct { uint64_t start, end; } *r;
  bool nomem;
};

static void
zero_list_add (struct zero_list *z, uint64_t start, uint64_t end)
{
  start = MAX (start, z->start);
  end = MIN (end, z->end);
  if (start >= end)
    return;
  if (z->n == z->cap) {
    void *p = grow_array (z->r, &z->cap, sizeof *z->r, 8);

    if (p == NULL) {
      z->nomem = true;
      return;
    }
    z->r = p;
  }
  z->r[z->n].start = start;
  z->r[z->n].end = end;
  z->n++;
}

static int
collect_pending (const struct extent *x, void *opaque)
{
  struct zero_list *z = opaque;

  if (x->offset >= z->end)
    return 1;
  zero_list_add (z, x->offset, x->offset + x->length);
  return 0;
}

/* A trim that is pending or in flight reads as zeros.  Over loop, a
 * write-zeroes that may unmap reaches the server as the same hole punch
 * as a discard (nbdfuse and discardfuse cannot tell them apart), and the
 * kernel then expects zeros at once: old data there would expose stale
 * blocks (ext4 zeroes unwritten extents this way).  Zeros are also what
 * a file backend reads after the discard, so the content does not change
 * when the discard is forwarded.  The ranges are taken before the read,
 * so one a write cancels meanwhile (a write concurrent with this read)
 * may read either way, as NBD allows.
 */
static int
collect_zero_ranges (struct engine *e, struct zero_list *z)
{
  engine_lock_acquire (e);
  if (extmap_count (e->map) > 0)
    extmap_iterate (e->map, z->start, collect_pending, z);
  for (const struct inflight *f = e->inflight; f != NULL; f = f->next)
    zero_list_add (z, f->offset, f->offset + f->length);
  engine_lock_release (e);
  if (z->nomem) {
    dc_error ("read: out of memory collecting pending discards");
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

int
engine_pread (struct engine *e, void *buf, uint32_t count,
                   uint64_t offset)
{
  struct zero_list z = { .start = offset, .end = offset + count };
  struct request rq;
  int r;

  if (check_range (e, offset, count, false) == -1)
    return -1;
  request_begin (e, &rq);
  r = collect_zero_ranges (e, &z);
  if (r == 0)
    r = backend_pread (e->backend, buf, count, offset);
  if (r == 0)
    for (size_t i = 0; i < z.n; i++)
      memset ((char *) buf + (z.r[i].start - offset), 0,
              z.r[i].end - z.r[i].start);
  free (z.r);
  request_end (e, &rq);
  return r;
}

/* Invariant 10: the FLUSH makes durable every change to the sets
 * recorded before it arrived.  Where the backend's flush covers the
 * journal, the records go to the device first (while the backend's
 * writeback starts) and the one flush makes both durable; elsewhere the
 * journal's own commit runs beside the backend's flush.
 */
static int
flush_with_journal (struct engine *e)
{
  uint64_t covered;
  int r;

  backend_flush_start (e->backend);
  if (engine_journal_write_out (e, &covered) == -1)
    return -1;
  r = backend_flush (e->backend);
  if (r == 0)
    engine_journal_flushed (e, covered);
  return r;
}

/* Invariant 10 for a FUA write or zero: the request is durable, and
 * so is its cancel.  Where the backend's flush covers the journal, the
 * request goes without FUA and one flush makes both durable (rather
 * than the backend's sync and the journal's own); elsewhere the journal
 * commits after the FUA request.
 */
static bool
fua_by_flush (struct engine *e, bool fua)
{
  return fua && engine_journal_shares_flush (e);
}

static int
fua_done (struct engine *e, bool by_flush, uint64_t ticket)
{
  return by_flush ? flush_with_journal (e) : engine_journal_wait (e, ticket);
}

/* Invariants 1 and 10: what a write or zero cancels leaves the pending
 * set, and its journal records reach the journal's file, before the data
 * reaches the backend: after a kill -9 of this process (the backend kept
 * the write), replay then never discards over it.  Power loss is the
 * last FLUSH's business (engine_journal_wait).
 */
static int
cancel_then_write_through (struct engine *e, uint64_t offset,
                           uint64_t length, uint64_t *cancelled)
{
  if (!engine_cancel_pending (e, offset, length, cancelled))
    return 0;
  if (engine_journal_write_through (e) == -1) {
    int err = errno;

    dc_error ("journal: cannot record a write's cancel before the write: "
              "%m");
    errno = err;
    return -1;
  }
  return 0;
}

int
engine_pwrite (struct engine *e, const void *buf, uint32_t count,
                    uint64_t offset, bool fua)
{
  struct request rq;
  uint64_t ticket;
  bool by_flush;
  int r;

  if (check_range (e, offset, count, true) == -1)
    return -1;
  request_begin (e, &rq);
  if (cancel_then_write_through (e, offset, count,
                                 &e->stats.cancelled_by_writes) == -1) {
    request_end (e, &rq);
    return -1;
  }
  by_flush = fua_by_flush (e, fua);
  ticket = fua && !by_flush ? engine_journal_begin (e) : 0;
  r = backend_pwrite (e->backend, buf, count, offset,
                               fua && !by_flush);
  if (r == 0 && fua)
    r = fua_done (e, by_flush, ticket);
  request_end (e, &rq);
  return r;
}

int
engine_zero (struct engine *e, uint64_t offset, uint64_t length,
                  bool may_trim, bool fua, bool fast)
{
  struct request rq;
  bool by_flush;
  int r;

  if (check_range (e, offset, length, true) == -1)
    return -1;
  if (fast && !backend_limits (e->backend)->can_zero) {
    errno = EOPNOTSUPP;
    return -1;
  }
  request_begin (e, &rq);
  if (cancel_then_write_through (e, offset, length,
                                 &e->stats.cancelled_by_zeroes) == -1) {
    request_end (e, &rq);
    return -1;
  }
  by_flush = fua_by_flush (e, fua);
  r = backend_zero (e->backend, offset, length, may_trim,
                             fua && !by_flush);
  /* Invariant 9: where the backend's zero deallocates as its discard
   * does, the zeroed granules are as clean as discarded ones.
   */
  if (r == 0 && may_trim && backend_limits (e->backend)->zero_unmaps) {
    engine_lock_acquire (e);
    clean_discarded (&e->clean, offset, length);
    engine_lock_release (e);
  }
  if (r == 0 && fua)
    r = fua_done (e, by_flush, by_flush ? 0 : engine_journal_begin (e));
  request_end (e, &rq);
  return r;
}

/* Invariant 2 for a trim sent at once: the backend can discard whole
 * granules only, so the sub-granule head and tail of [offset,
 * offset+length) outside [aoff, aoff+alen) are kept pending (where they
 * may merge into whole granules), or, in the passthrough baseline, which
 * keeps nothing, dropped and counted.  May drop the lock (recording).
 */
static void
keep_edges_drops_lock (struct engine *e, uint64_t offset, uint64_t length,
                       uint64_t aoff, uint64_t alen)
  REQUIRES (engine_lock)
{
  uint64_t head = aoff - offset, tail = offset + length - (aoff + alen);
  uint64_t edges[2][2] = { { offset, head }, { aoff + alen, tail } };

  for (int i = 0; i < 2; i++) {
    if (edges[i][1] == 0)
      continue;
    if (engine_keys (e)->passthrough) {
      e->stats.dropped++;
      e->stats.dropped_bytes += edges[i][1];
      e->stats.dropped_fragment_bytes += edges[i][1];
    }
    else
      engine_record_trim_drops_lock (e, edges[i][0], edges[i][1]);
  }
}

/* FUA and passthrough trims go to the backend before the reply, aligned
 * to whole granules (what the backend would cut them to).  Pending
 * extents under the aligned part are part of this discard now.
 */
static int
trim_now (struct engine *e, uint64_t offset, uint64_t length, bool fua)
{
  uint64_t aoff, alen;
  int r = 0;

  if (!policy_aligned_part (offset, length, e->granularity, &aoff, &alen)) {
    aoff = offset;
    alen = 0;
  }
  engine_lock_acquire (e);
  keep_edges_drops_lock (e, offset, length, aoff, alen);
  if (alen > 0) {
    extmap_remove (e->map, aoff, alen, NULL);
    r = engine_forward_drops_lock (e, aoff, alen, engine_ticks_locked (e),
                                   fua, !engine_keys (e)->passthrough);
  }
  engine_lock_release (e);
  if (r == -1 && (errno == EOPNOTSUPP || errno == ENOTSUP))
    r = 0;
  /* A trim is a hint: only the passthrough baseline shows the backend's
   * error to the client, as a plain proxy would.
   */
  return engine_keys (e)->passthrough ? r : 0;
}

int
engine_trim (struct engine *e, uint64_t offset, uint64_t length,
                  bool fua)
{
  int r = 0;

  if (check_range (e, offset, length, true) == -1)
    return -1;
  request_begin (e, NULL);
  engine_lock_acquire (e);
  e->stats.trims++;
  e->stats.trim_bytes += length;
  if (e->forwarding_disabled) {
    e->stats.dropped++;
    e->stats.dropped_bytes += length;
    e->stats.dropped_unsupported_bytes += length;
    engine_lock_release (e);
  }
  /* Invariant 11: while the breaker is open a FUA trim waits with the
   * others (its old content is one a trimmed range may read as).
   */
  else if (engine_keys (e)->passthrough ||
           (fua && !breaker_holds (&e->breaker))) {
    engine_lock_release (e);
    r = trim_now (e, offset, length, fua);
  }
  else {
    engine_record_trim_drops_lock (e, offset, length);
    engine_lock_release (e);
  }
  request_end (e, NULL);
  return r;
}

static int
flush (struct engine *e, bool forward_first)
{
  uint64_t ticket;
  int r;

  request_begin (e, NULL);
  if (forward_first)
    engine_drain (e, NULL, NULL);
  if (engine_journal_shares_flush (e))
    r = flush_with_journal (e);
  else {
    ticket = engine_journal_begin (e);
    r = backend_flush (e->backend);
    if (engine_journal_wait (e, ticket) == -1 && r == 0)
      r = -1;
  }
  request_end (e, NULL);
  return r;
}

/* With flush-discards, pending discards go out first.  A discard that
 * fails stays pending, is retried and counted (invariant 5), but it
 * does not fail the flush: FLUSH promises durable writes, a discard is
 * a hint, and a client that sees its flush fail (a file system) takes
 * its data for lost and shuts down.
 */
int
engine_flush (struct engine *e)
{
  return flush (e, engine_keys (e)->flush_discards);
}

int
engine_flush_data (struct engine *e)
{
  return flush (e, false);
}

bool
engine_discard_pending (struct engine *e, uint64_t offset, uint64_t length)
{
  struct extent x;
  bool r;

  engine_lock_acquire (e);
  r = extmap_find_overlap (e->map, offset, length, &x) ||
      engine_overlaps_inflight_locked (e, offset, length);
  engine_lock_release (e);
  return r;
}

int
engine_extents (struct engine *e, uint64_t offset, uint64_t length,
                     backend_extent_fn fn, void *opaque)
{
  int r;

  request_begin (e, NULL);
  r = backend_extents (e->backend, offset, length, fn, opaque);
  request_end (e, NULL);
  return r;
}

bool
engine_known_clean (struct engine *e, uint64_t offset, uint64_t length)
{
  bool r;

  engine_lock_acquire (e);
  r = clean_covers (&e->clean, offset, length);
  engine_lock_release (e);
  return r;
}

void
engine_test_set_clock (struct engine *e, engine_clock_fn *fn, void *opaque)
{
  engine_lock_acquire (e);
  e->clock = fn;
  e->clock_opaque = opaque;
  e->epoch_ms = engine_now_ms (e);
  atomic_store (&e->last_request_ms, e->epoch_ms);
  pace_meter_init (&e->pace, engine_now_ns (e));
  e->next_slot_ns = e->pace_next_ns = 0;
  e->retry_at_ms = 0;
  engine_lock_release (e);
}
