/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the flusher thread.  It forwards eligible pending
 * discards, largest first, only while clients are idle, at most rate per
 * second, and backs off after a failure.  With budget= it paces instead
 * (pacing.h): batch size and spacing come from the measured cost of
 * discards to client requests, clients busy or not, and near
 * max-extents it forwards regardless.  Every wait is a timed wait on
 * e->wakeup, which trims, pause/resume, set, flush requests and stop
 * signal.  A flush asked for on the control socket puts it in forced
 * mode: everything forwardable goes, ignoring delay, minlen, idle, rate,
 * pause and backoff, and the askers are told on e->flushed.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"
#include "policy.h"

/* Upper bound on any one sleep, so a missed signal costs at most this. */
#define MAX_SLEEP_MS 1000
/* While requests are in progress, look again this often. */
#define BUSY_POLL_MS 20

/* Near max-extents (this share of it) a paced flusher forwards at once. */
#define MEMORY_HIGH_WATER(max) ((max) - (max) / 8)

/* Wait on cond for at most ns (the engine's conds use CLOCK_MONOTONIC). */
static int
timedwait_ns (pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t ns)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  ns += (uint64_t) ts.tv_nsec;
  ts.tv_sec += ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  return pthread_cond_timedwait (cond, lock, &ts);
}

static int
timedwait_ms (pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t ms)
{
  return timedwait_ns (cond, lock, ms * 1000000);
}

void
engine_sleep_locked (struct engine *e, uint64_t ms)
{
  timedwait_ms (&e->wakeup, &e->lock, MIN (ms, MAX_SLEEP_MS));
}

static bool
flush_wanted (const struct engine *e)
{
  return e->flush_requested != e->flush_completed;
}

/* How long until clients count as idle (0: idle now). */
static uint64_t
ms_until_idle (struct engine *e, uint64_t now)
{
  uint64_t last = atomic_load (&e->last_request_ms);

  if (e->cfg.idle_ms == 0)
    return 0;
  if (atomic_load (&e->active_requests) > 0)
    return BUSY_POLL_MS;
  if (now >= last + e->cfg.idle_ms)
    return 0;
  return last + e->cfg.idle_ms - now;
}

/* How long until the rate limit lets the next discard go (0: now). */
static uint64_t
ms_until_slot (struct engine *e)
{
  uint64_t now_ns;

  if (e->cfg.rate == 0)
    return 0;
  now_ns = engine_now_ns ();
  if (now_ns >= e->next_slot_ns)
    return 0;
  return (e->next_slot_ns - now_ns + 999999) / 1000000;
}

static void
take_slot (struct engine *e)
{
  uint64_t now_ns = engine_now_ns ();

  if (e->cfg.rate)
    e->next_slot_ns = MAX (e->next_slot_ns, now_ns) + 1000000000 / e->cfg.rate;
}

/* Nothing was picked: sleep until the oldest extent comes of age, or,
 * when only unforwardable fragments are eligible, until the map changes.
 */
static void
wait_for_eligible (struct engine *e, uint32_t cutoff)
{
  struct extent oldest;
  uint64_t generation = e->map_generation;

  if (extmap_oldest (e->map, &oldest) && oldest.time > cutoff) {
    engine_sleep_locked (e, oldest.time - cutoff);
    return;
  }
  while (!e->stopping && generation == e->map_generation && !e->paused &&
         !flush_wanted (e))
    engine_sleep_locked (e, MAX_SLEEP_MS);
}

/* Forced mode: forward one range, or, when nothing forwardable is left
 * (or forwarding failed), complete every flush asked for so far.
 */
static void
forced_turn (struct engine *e)
{
  uint64_t target = e->flush_requested;
  uint64_t offset, length;
  uint32_t time;
  int err = 0;

  if (e->forwarding_disabled)
    err = EOPNOTSUPP;
  else if (engine_pick_locked (e, UINT32_MAX, 0, &offset, &length, &time)) {
    if (engine_forward_locked (e, offset, length, time, false, true) == 0)
      return;
    err = errno == ENOTSUP ? EOPNOTSUPP : errno;
  }
  e->flush_completed = target;
  e->flush_errno = err;
  pthread_cond_broadcast (&e->flushed);
}

/* Forward the largest range older than delay_ms (at least minlen,
 * at most max_len), or wait for one.  rate: take a rate= slot before
 * sending.  Returns whether it sent one.
 */
static bool
forward_eligible (struct engine *e, uint64_t delay_ms, uint64_t minlen,
                  uint64_t max_len, bool rate)
{
  uint64_t offset, length;
  uint32_t ticks, cutoff, time;

  ticks = engine_ticks (e);
  if (ticks < delay_ms) {
    engine_sleep_locked (e, delay_ms - ticks);
    return false;
  }
  cutoff = ticks - (uint32_t) delay_ms;
  if (!engine_pick_max_locked (e, cutoff, minlen, max_len, &offset, &length,
                               &time)) {
    wait_for_eligible (e, cutoff);
    return false;
  }
  if (rate)
    take_slot (e);
  engine_forward_locked (e, offset, length, time, false, true);
  return true;
}

static const char *const mode_names[] = {
  [PACE_PROBE] = "probe", [PACE_FITS] = "fits", [PACE_RARE] = "rare",
};

/* No client request now nor for the idle time (at least BUSY_POLL_MS,
 * so idle=0 does not turn pacing off): nobody to stall.
 */
static bool
clients_quiet (struct engine *e, uint64_t now)
{
  uint64_t quiet = MAX (e->cfg.idle_ms, BUSY_POLL_MS);

  return atomic_load (&e->active_requests) == 0 &&
    now >= atomic_load (&e->last_request_ms) + quiet;
}

/* budget=: the memory bound first, then the spacing the last decision
 * asked for, then one discard of the size the model gives, and the
 * spacing for the next.
 */
static void
paced_turn (struct engine *e, uint64_t now)
{
  struct pace_inputs in = {
    .budget_us = e->cfg.budget_ms * 1000, .granularity = e->granularity,
    .chunk_limit = e->chunk_limit,
  };
  uint64_t now_ns = engine_now_ns ();
  struct pace_decision *d = &e->pace_last;

  if (extmap_count (e->map) >= MEMORY_HIGH_WATER (e->cfg.max_extents)) {
    e->pace_mode = "memory";
    e->pace_adapting = PACE_PROBE;
    if (forward_eligible (e, 0, 0, e->chunk_limit, false))
      e->forced_by_memory++;
    return;
  }
  if (now_ns < e->pace_next_ns && !clients_quiet (e, now)) {
    timedwait_ns (&e->wakeup, &e->lock,
                  MIN (e->pace_next_ns - now_ns, MAX_SLEEP_MS * UINT64_C (1000000)));
    return;
  }
  pace_meter_inputs (&e->pace, &in);
  pace_decide (&in, d);
  if (!forward_eligible (e, e->cfg.delay_ms, e->cfg.minlen, d->max_len,
                         false))
    return;
  /* What the next window measures adapts this mode's spacing, unless
   * nobody was there to measure.
   */
  e->pace_adapting = d->mode;
  e->pace_mode = mode_names[d->mode];
  if (clients_quiet (e, engine_now_ms ())) {
    e->pace_adapting = PACE_PROBE;
    e->pace_mode = "idle";
  }
  e->pace_next_ns = engine_now_ns () + d->gap_us * 1000;
}

/* One turn of the loop: wait for whatever holds forwarding back, or
 * forward one range.
 */
static void
flusher_turn (struct engine *e)
{
  uint64_t now = engine_now_ms ();
  uint64_t wait;

  /* Measuring goes on without budget= too, for the statistics. */
  pace_meter_rotate (&e->pace, engine_now_ns (), e->cfg.budget_ms * 1000,
                     e->cfg.budget_ms ? e->pace_adapting : PACE_PROBE);
  if (flush_wanted (e)) {
    forced_turn (e);
    return;
  }
  if (e->paused || e->forwarding_disabled || extmap_count (e->map) == 0) {
    engine_sleep_locked (e, MAX_SLEEP_MS);
    return;
  }
  if (now < e->retry_at_ms) {
    engine_sleep_locked (e, e->retry_at_ms - now);
    return;
  }
  if (e->cfg.budget_ms) {
    paced_turn (e, now);
    return;
  }
  e->pace_mode = NULL;
  if ((wait = ms_until_idle (e, now)) > 0 || (wait = ms_until_slot (e)) > 0) {
    engine_sleep_locked (e, wait);
    return;
  }
  forward_eligible (e, e->cfg.delay_ms, e->cfg.minlen, e->chunk_limit, true);
}

void *
engine_flusher_thread (void *opaque)
{
  struct engine *e = opaque;

  pthread_mutex_lock (&e->lock);
  while (!e->stopping)
    flusher_turn (e);
  pthread_mutex_unlock (&e->lock);
  return NULL;
}

void
engine_pace_stats_locked (struct engine *e, struct engine_stats *st)
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
  pace_fit (&m->ring, &model);
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
  st->pace_mode = e->cfg.budget_ms && e->pace_mode ? e->pace_mode : "off";
}

void
engine_flush_begin (struct engine *e, struct engine_flush *f)
{
  uint64_t forwardable, subgranule;

  engine_sum_pending (e, &forwardable, &subgranule);
  pthread_mutex_lock (&e->lock);
  f->ticket = ++e->flush_requested;
  f->start_ms = engine_now_ms ();
  f->forwarded = e->stats.forwarded;
  f->forwarded_bytes = e->stats.forwarded_bytes;
  f->total_bytes = forwardable;
  pthread_cond_broadcast (&e->wakeup);
  pthread_mutex_unlock (&e->lock);
}

int
engine_flush_wait (struct engine *e, const struct engine_flush *f,
                   uint64_t timeout_ms, struct engine_flush_progress *p)
{
  int r = 0;

  pthread_mutex_lock (&e->lock);
  while (e->flush_completed < f->ticket && !e->stopping &&
         timedwait_ms (&e->flushed, &e->lock, timeout_ms) != ETIMEDOUT)
    ;
  p->forwarded = e->stats.forwarded - f->forwarded;
  p->forwarded_bytes = e->stats.forwarded_bytes - f->forwarded_bytes;
  p->total_bytes = f->total_bytes;
  p->elapsed_ms = engine_now_ms () - f->start_ms;
  if (e->flush_completed >= f->ticket) {
    r = e->flush_errno ? -1 : 1;
    errno = e->flush_errno;
  }
  else if (e->stopping) {
    r = -1;
    errno = ESHUTDOWN;
  }
  pthread_mutex_unlock (&e->lock);
  return r;
}
