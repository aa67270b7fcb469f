/* discardcache: the flusher thread.  It forwards eligible pending
 * discards, largest first, only while clients are idle, at most rate per
 * second, and backs off after a failure.  Every wait is a timed wait on
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

/* Wait on cond for at most ms (the engine's conds use CLOCK_MONOTONIC). */
static int
timedwait_ms (pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t ms)
{
  struct timespec ts;
  uint64_t ns;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  ns = (uint64_t) ts.tv_nsec + (ms % 1000) * 1000000;
  ts.tv_sec += ms / 1000 + ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  return pthread_cond_timedwait (cond, lock, &ts);
}

static void
sleep_locked (struct engine *e, uint64_t ms)
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
    sleep_locked (e, oldest.time - cutoff);
    return;
  }
  while (!e->stopping && generation == e->map_generation && !e->paused &&
         !flush_wanted (e))
    sleep_locked (e, MAX_SLEEP_MS);
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

/* One turn of the loop: wait for whatever holds forwarding back, or
 * forward one range.
 */
static void
flusher_turn (struct engine *e)
{
  uint64_t now = engine_now_ms ();
  uint64_t wait, offset, length;
  uint32_t ticks, cutoff, time;

  if (flush_wanted (e)) {
    forced_turn (e);
    return;
  }
  if (e->paused || e->forwarding_disabled || extmap_count (e->map) == 0) {
    sleep_locked (e, MAX_SLEEP_MS);
    return;
  }
  if (now < e->retry_at_ms) {
    sleep_locked (e, e->retry_at_ms - now);
    return;
  }
  if ((wait = ms_until_idle (e, now)) > 0 || (wait = ms_until_slot (e)) > 0) {
    sleep_locked (e, wait);
    return;
  }
  ticks = engine_ticks (e);
  if (ticks < e->cfg.delay_ms) {
    sleep_locked (e, e->cfg.delay_ms - ticks);
    return;
  }
  cutoff = ticks - (uint32_t) e->cfg.delay_ms;
  if (!engine_pick_locked (e, cutoff, e->cfg.minlen, &offset, &length, &time)) {
    wait_for_eligible (e, cutoff);
    return;
  }
  take_slot (e);
  engine_forward_locked (e, offset, length, time, false, true);
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

/* What a flush can send now: the aligned part of every pending extent. */
struct forwardable {
  uint64_t granularity;
  uint64_t bytes;
};

static int
add_forwardable (const struct extent *x, void *opaque)
{
  struct forwardable *f = opaque;
  uint64_t aoff, alen;

  if (policy_aligned_part (x->offset, x->length, f->granularity, &aoff, &alen))
    f->bytes += alen;
  return 0;
}

void
engine_flush_begin (struct engine *e, struct engine_flush *f)
{
  struct forwardable sum = { .granularity = e->granularity };

  pthread_mutex_lock (&e->lock);
  f->ticket = ++e->flush_requested;
  f->start_ms = engine_now_ms ();
  f->forwarded = e->stats.forwarded;
  f->forwarded_bytes = e->stats.forwarded_bytes;
  extmap_iterate (e->map, 0, add_forwardable, &sum);
  f->total_bytes = sum.bytes;
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
