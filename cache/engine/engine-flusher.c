/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the flusher thread.  It forwards eligible pending
 * discards, largest first, only while clients are idle, at most rate per
 * second, and backs off after a failure.  With budget= it paces instead
 * (pacing.h): batch size and spacing come from the measured cost of
 * discards to client requests, clients busy or not, and near
 * max-extents it forwards regardless.  A flush asked for on the control
 * socket puts it in forced mode: everything forwardable goes, ignoring
 * delay, minlen, small, idle, rate, pause and backoff, joined across
 * known-clean gaps where that saves commands (engine-small.c), and the askers
 * are told on e->flushed.
 *
 * Liveness (invariant 8, docs/design-notes.md).  Each turn either
 * forwards one range or returns the moment its answer can next change
 * without new input: the oldest forwardable extent reaching delay
 * (extmap_oldest_forwardable), the idle gap ending, the rate slot or
 * the pacing gap opening, a backoff expiring.  The thread sleeps until
 * then, or until signalled on e->wakeup (trims, pause/resume, set,
 * flush requests, stop); no turn waits for the map to change while an
 * extent can still come of age.  Extents that can never be forwarded
 * (shorter than minlen, or holding no whole granule) are not in the
 * map's forwardable column: they neither wake the flusher nor hide one
 * that comes of age later.  Extents under the small= threshold are held
 * (small.h): not forwardable by policy until an explicit flush, so they
 * are out of that column too; the threshold is brought up to date at
 * the start of each turn, so one that fell releases them at once.
 * Only a wait with nothing to come without
 * input is open-ended (ENGINE_FLUSHER_IDLE), and even that one is cut
 * at a second.
 *
 * Invariant 11: outside the forwarding windows (window=, unless under
 * pressure) and while the circuit breaker is open, the flusher holds:
 * both are explicit policies, and the turn returns when the window
 * opens or the next probe is due.  Between turns it checks one proof
 * of effect sample, if one is queued.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "arith.h"
#include "clock.h"
#include "engine-internal.h"
#include "log.h"
#include "policy.h"

#define MAX_SLEEP_MS ENGINE_MAX_SLEEP_MS
/* While requests are in progress, look again this often (a request's
 * end signals nobody: that would cost every request a syscall).
 */
#define BUSY_POLL_MS UINT64_C (20)
/* An eligible extent could not be split for want of memory: retry. */
#define NOMEM_RETRY_MS UINT64_C (1000)

/* Near max-extents (this share of it) a paced flusher forwards at once. */
#define MEMORY_HIGH_WATER(max) ((max) - (max) / 8)

#define MS(ms) ((ms) * UINT64_C (1000000))

/* Wait on e->wakeup for at most ns of real time. */
static void
sleep_ns_drops_lock (struct engine *e, uint64_t ns)
  REQUIRES (engine_lock)
{
  struct timespec ts = deadline_after_ns (MIN (ns, MS (MAX_SLEEP_MS)));

  engine_cond_timedwait_drops_lock (e, &e->wakeup, &ts);
}

static bool
flush_wanted_locked (const struct engine *e)
  REQUIRES (engine_lock)
{
  return e->flush_requested != e->flush_completed;
}

/* When clients count as idle after quiet_ms without a request: now if
 * they do; while a request is in progress, a poll later.
 */
static uint64_t
quiet_at_ns (struct engine *e, uint64_t now_ns, uint64_t quiet_ms)
{
  if (quiet_ms == 0)
    return now_ns;
  if (atomic_load (&e->active_requests) > 0)
    return now_ns + MS (BUSY_POLL_MS);
  return MAX (now_ns, MS (atomic_load (&e->last_request_ms) + quiet_ms));
}

/* When the rate limit lets the next discard go. */
static uint64_t
slot_at_ns_locked (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock)
{
  return e->cfg.rate ? MAX (now_ns, e->next_slot_ns) : now_ns;
}

static void
take_slot_locked (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock)
{
  if (e->cfg.rate)
    e->next_slot_ns = MAX (e->next_slot_ns, now_ns) + 1000000000 / e->cfg.rate;
}

/* When the first forwardable extent (holding a whole granule, at least
 * minlen long) has waited delay_ms: at most now if one has, or
 * ENGINE_FLUSHER_IDLE if there is none (only new input can make one).
 * O(height): the map keeps every subtree's oldest forwardable time.
 */
static uint64_t
eligible_at_ns_locked (struct engine *e, uint64_t delay_ms)
  REQUIRES (engine_lock)
{
  struct extent x;

  if (!extmap_oldest_forwardable (e->map, &x))
    return ENGINE_FLUSHER_IDLE;
  return MS (e->epoch_ms + x.time + delay_ms);
}

/* Forward the largest range older than delay_ms (at least minlen, at
 * most max_len).  Returns the time of the next turn: now if it sent one
 * (or tried: a backoff then decides the next), else when the next one
 * comes of age.  With delay_ms and minlen 0 (memory mode) nothing
 * picked means nothing holds a whole granule: only input can change
 * that.  An extent eligible but not picked (its split found no memory)
 * is retried later rather than at once, so the thread cannot spin.
 */
static uint64_t
forward_eligible_drops_lock (struct engine *e, uint64_t now_ns,
                             uint64_t delay_ms, uint64_t minlen,
                             uint64_t max_len, bool rate)
  REQUIRES (engine_lock)
{
  uint64_t offset, length, at;
  uint32_t ticks = engine_ticks_locked (e), time;

  if (ticks >= delay_ms &&
      engine_pick_max_locked (e, ticks - (uint32_t) delay_ms, minlen,
                              max_len, &offset, &length, &time)) {
    if (rate)
      take_slot_locked (e, now_ns);
    engine_forward_drops_lock (e, offset, length, time, false, true);
    return now_ns;
  }
  if (delay_ms == 0 && minlen == 0)
    return ENGINE_FLUSHER_IDLE;
  at = eligible_at_ns_locked (e, delay_ms);
  return at > now_ns ? at : now_ns + MS (NOMEM_RETRY_MS);
}

/* Forced mode: forward one range, or, when nothing forwardable is left
 * (or forwarding failed), complete every flush asked for so far.
 */
static void
forced_turn_drops_lock (struct engine *e)
  REQUIRES (engine_lock)
{
  uint64_t target = e->flush_requested;
  uint64_t offset, length;
  uint32_t time;
  int err = 0;

  /* An explicit flush overrides the windows, and is one probe of an
   * open breaker: it goes on only if that probe succeeds.
   */
  engine_breaker_probe_now_locked (e);
  if (e->forwarding_disabled)
    err = EOPNOTSUPP;
  else if (engine_pick_max_locked (e, UINT32_MAX, 0,
                                   engine_pick_limit_locked (e),
                                   &offset, &length, &time)) {
    /* A probe stays one small discard; otherwise join across clean gaps. */
    if (!breaker_holds (&e->breaker))
      engine_join_clean_locked (e, &offset, &length);
    if (engine_send_or_probe_drops_lock (e, offset, length, time) == 0)
      return;
    err = errno == ENOTSUP ? EOPNOTSUPP : errno;
  }
  e->flush_completed = target;
  e->flush_errno = err;
  pthread_cond_broadcast (&e->flushed);
}

/* Clients quiet for the idle time, and at least BUSY_POLL_MS so that
 * idle=0 does not turn pacing off: nobody to stall, the gap is moot.
 */
static uint64_t
pace_quiet_at_ns_locked (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock)
{
  return quiet_at_ns (e, now_ns, MAX (e->cfg.idle_ms, BUSY_POLL_MS));
}

/* budget=: the memory bound first, then whether anything is eligible,
 * then the spacing the last decision asked for (moot once clients are
 * quiet), then one discard of the size the model gives, and the spacing
 * for the next.
 */
static uint64_t
paced_turn_drops_lock (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock)
{
  struct pace_inputs in = {
    .budget_us = e->cfg.budget_ms * 1000, .granularity = e->granularity,
    .chunk_limit = e->chunk_limit,
  };
  struct pace_decision *d = &e->pace_last;
  uint64_t at;

  if (extmap_count (e->map) >= MEMORY_HIGH_WATER (e->cfg.max_extents)) {
    e->pace_mode = PACE_MEMORY;
    e->pace_adapting = PACE_PROBE;
    at = forward_eligible_drops_lock (e, now_ns, 0, 0, e->chunk_limit, false);
    if (at <= now_ns)
      e->forced_by_memory++;
    return at;
  }
  if ((at = eligible_at_ns_locked (e, e->cfg.delay_ms)) > now_ns)
    return at;
  if (now_ns < e->pace_next_ns &&
      (at = pace_quiet_at_ns_locked (e, now_ns)) > now_ns)
    return MIN (e->pace_next_ns, at);
  pace_meter_inputs (&e->pace, &in);
  pace_decide (&in, d);
  at = forward_eligible_drops_lock (e, now_ns, e->cfg.delay_ms,
                                    engine_flusher_minlen_locked (e),
                                    d->max_len, false);
  if (at > now_ns)
    return at;
  /* What the next window measures adapts this mode's spacing, unless
   * nobody was there to measure.
   */
  now_ns = engine_now_ns (e);
  e->pace_adapting = d->mode;
  e->pace_mode = d->mode;
  if (pace_quiet_at_ns_locked (e, now_ns) <= now_ns) {
    e->pace_adapting = PACE_PROBE;
    e->pace_mode = PACE_IDLE;
  }
  e->pace_next_ns = now_ns + d->gap_us * 1000;
  return now_ns;
}

/* The breaker is open: nothing goes but one probe when it is due, an
 * eligible extent (delay, minlen) of at most the probe's size.
 */
static uint64_t
breaker_turn_drops_lock (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock)
{
  uint64_t offset, length, at;
  uint32_t ticks = engine_ticks_locked (e), time;

  if (!breaker_probe_due (&e->breaker, now_ns, &at))
    return at == UINT64_MAX ? now_ns + MS (MAX_SLEEP_MS) : at;
  if (ticks >= e->cfg.delay_ms &&
      engine_pick_max_locked (e, ticks - (uint32_t) e->cfg.delay_ms,
                              e->cfg.minlen, engine_pick_limit_locked (e),
                              &offset, &length, &time)) {
    engine_probe_drops_lock (e, offset, length, time);
    return now_ns;
  }
  at = eligible_at_ns_locked (e, e->cfg.delay_ms);
  return at > now_ns ? at : now_ns + MS (NOMEM_RETRY_MS);
}

uint64_t
engine_flusher_turn_drops_lock (struct engine *e)
  REQUIRES (engine_lock)
{
  uint64_t now_ns = engine_now_ns (e), at;

  /* Measuring goes on without budget= too, for the statistics. */
  pace_meter_rotate (&e->pace, now_ns, e->cfg.budget_ms * 1000,
                     e->cfg.budget_ms ? e->pace_adapting : PACE_PROBE);
  /* small=auto follows the model each discard refines, before the turn
   * looks for work: a threshold that fell releases extents now, not at
   * the next input (invariant 8).
   */
  engine_small_apply_locked (e);
  if (flush_wanted_locked (e)) {
    forced_turn_drops_lock (e);
    return now_ns;
  }
  if ((at = engine_pressure_turn_drops_lock (e, now_ns)) != 0)
    return at;
  if (proof_queued (&e->proof)) {
    engine_proof_turn_drops_lock (e);
    return now_ns;
  }
  if (e->paused || e->forwarding_disabled || extmap_count (e->map) == 0)
    return ENGINE_FLUSHER_IDLE;
  if ((at = engine_window_at_ns_locked (e, now_ns)) > now_ns)
    return at;
  if (breaker_holds (&e->breaker))
    return breaker_turn_drops_lock (e, now_ns);
  if (now_ns < MS (e->retry_at_ms))
    return MS (e->retry_at_ms);
  if (e->cfg.budget_ms)
    return paced_turn_drops_lock (e, now_ns);
  e->pace_mode = PACE_OFF;
  if ((at = eligible_at_ns_locked (e, e->cfg.delay_ms)) > now_ns)
    return at;
  at = MAX (quiet_at_ns (e, now_ns, e->cfg.idle_ms),
            slot_at_ns_locked (e, now_ns));
  if (at > now_ns)
    return at;
  return forward_eligible_drops_lock (e, now_ns, e->cfg.delay_ms,
                                      engine_flusher_minlen_locked (e),
                                      e->chunk_limit, true);
}

uint64_t
engine_flusher_step (struct engine *e)
{
  uint64_t at;

  engine_lock_acquire (e);
  at = engine_flusher_turn_drops_lock (e);
  engine_lock_release (e);
  return at;
}

void *
engine_flusher_thread (void *opaque)
{
  struct engine *e = opaque;

  engine_lock_acquire (e);
  while (!e->stopping) {
    uint64_t at = engine_flusher_turn_drops_lock (e);
    uint64_t now_ns = engine_now_ns (e);

    if (at > now_ns && !e->stopping)
      sleep_ns_drops_lock (e, at - now_ns);
  }
  engine_lock_release (e);
  return NULL;
}

void
engine_pace_stats_locked (struct engine *e, struct engine_stats *st)
  REQUIRES (engine_lock)
{
  const struct pace_meter *m = &e->pace;
  uint64_t *lat[PACE_CLASSES][2] = {
    { &st->discard_p50_us_64k, &st->discard_p99_us_64k },
    { &st->discard_p50_us_1m, &st->discard_p99_us_1m },
    { &st->discard_p50_us_16m, &st->discard_p99_us_16m },
    { &st->discard_p50_us_large, &st->discard_p99_us_large },
  };
  struct pace_model model;

  for (unsigned c = 0; c < PACE_CLASSES; c++) {
    *lat[c][0] = pace_meter_discard_quantile (m, c, 0.5);
    *lat[c][1] = pace_meter_discard_quantile (m, c, 0.99);
  }
  pace_meter_model (m, &model);
  st->model_a_us = (uint64_t) model.a_us;
  st->model_b_us_per_gib = (uint64_t) (model.b_us_per_byte * 1073741824.0);
  st->client_p99_us = m->client_p99_us;
  st->client_p99_discard_us = m->client_p99_discard_us;
  st->client_p99_all_us = m->client_p99_all_us;
  st->client_requests = m->win_requests;
  st->client_requests_discard = m->win_overlapped;
  st->stall_us = m->stall_us > 0 ? (uint64_t) m->stall_us : 0;
  st->budget_us = e->cfg.budget_ms * 1000;
  st->pace_bytes_per_s = m->bytes_per_s;
  st->pace_commands_per_s = m->commands_per_s;
  st->pace_max_len = e->cfg.budget_ms ? e->pace_last.max_len : e->chunk_limit;
  st->pace_gap_us = e->cfg.budget_ms ? e->pace_last.gap_us : 0;
  st->pace_rare_share_ppm = (uint64_t) (m->rare_share * 1e6);
  st->budget_overruns = m->overruns;
  st->drain_eta_ms = pace_drain_eta_ms (st->pending_bytes - st->subgranule_bytes,
                                        m->bytes_per_s);
  st->forced_by_memory = e->forced_by_memory;
  st->pace_mode = e->cfg.budget_ms ? e->pace_mode : PACE_OFF;
}

void
engine_flush_begin (struct engine *e, struct engine_flush *f)
{
  engine_lock_acquire (e);
  f->ticket = ++e->flush_requested;
  f->start_ms = engine_now_ms (e);
  f->forwarded = e->stats.forwarded;
  f->forwarded_bytes = e->stats.forwarded_bytes;
  f->total_bytes = extmap_aligned_bytes (e->map);
  pthread_cond_broadcast (&e->wakeup);
  engine_lock_release (e);
}

int
engine_flush_wait (struct engine *e, const struct engine_flush *f,
                   uint64_t timeout_ms, struct engine_flush_progress *p)
{
  /* One deadline for the whole wait, however often it wakes. */
  struct timespec deadline = deadline_after_ns (timeout_ms * 1000000);
  int r = 0;

  engine_lock_acquire (e);
  while (e->flush_completed < f->ticket && !e->stopping &&
         engine_cond_timedwait_drops_lock (e, &e->flushed, &deadline) !=
         ETIMEDOUT)
    ;
  p->forwarded = e->stats.forwarded - f->forwarded;
  p->forwarded_bytes = e->stats.forwarded_bytes - f->forwarded_bytes;
  p->total_bytes = f->total_bytes;
  p->elapsed_ms = engine_now_ms (e) - f->start_ms;
  if (e->flush_completed >= f->ticket) {
    r = e->flush_errno ? -1 : 1;
    errno = e->flush_errno;
  }
  else if (e->stopping) {
    r = -1;
    errno = ESHUTDOWN;
  }
  engine_lock_release (e);
  return r;
}
