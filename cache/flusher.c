/* discardcache: the flusher thread.  It forwards eligible pending
 * discards, largest first, only while clients are idle, at most rate per
 * second, and backs off after a failure.  Every wait is a timed wait on
 * e->wakeup, which trims, pause/resume, set and stop signal.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"

/* Upper bound on any one sleep, so a missed signal costs at most this. */
#define MAX_SLEEP_MS 1000
/* While requests are in progress, look again this often. */
#define BUSY_POLL_MS 20

void
engine_sleep_locked (struct engine *e, uint64_t ms)
{
  struct timespec ts;
  uint64_t ns;

  ms = MIN (ms, MAX_SLEEP_MS);
  clock_gettime (CLOCK_MONOTONIC, &ts);
  ns = (uint64_t) ts.tv_nsec + (ms % 1000) * 1000000;
  ts.tv_sec += ms / 1000 + ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  pthread_cond_timedwait (&e->wakeup, &e->lock, &ts);
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
  while (!e->stopping && generation == e->map_generation && !e->paused)
    engine_sleep_locked (e, MAX_SLEEP_MS);
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

  if (e->paused || e->forwarding_disabled || extmap_count (e->map) == 0) {
    engine_sleep_locked (e, MAX_SLEEP_MS);
    return;
  }
  if (now < e->retry_at_ms) {
    engine_sleep_locked (e, e->retry_at_ms - now);
    return;
  }
  if ((wait = ms_until_idle (e, now)) > 0 || (wait = ms_until_slot (e)) > 0) {
    engine_sleep_locked (e, wait);
    return;
  }
  ticks = engine_ticks (e);
  if (ticks < e->cfg.delay_ms) {
    engine_sleep_locked (e, e->cfg.delay_ms - ticks);
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
