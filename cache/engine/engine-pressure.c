/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: space pressure (low-water=).  Every pending byte is a
 * byte the store still holds; when the backend's free space falls
 * below the mark, the flusher forwards everything forwardable at once,
 * ignoring delay, idle, rate and budget (still whole granules, still
 * never over data written since: the same pick and forward as always,
 * invariants 1 and 11).  Free space is read on the flusher's schedule
 * (backend free_space: a statvfs for a file, the pool's df and quota
 * for RBD, cached for a second), never on the data path.
 * Entering and leaving pressure are logged once each and counted.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"

/* How often the free space is read: often enough that a filling store
 * is noticed within a flusher cycle (the flusher wakes at least every
 * second), rarely enough to cost nothing.  Under pressure, after each
 * forwarded range (capped by this), so that it stops once space is back.
 */
#define LOOK_EVERY_NS (UINT64_C (250) * 1000000)
#define LOOK_UNDER_PRESSURE_NS (UINT64_C (20) * 1000000)

int
engine_pressure_check (struct engine *e)
{
  const struct engine_config *cfg = engine_keys (e);

  if (cfg->low_water_ppm == 0 && cfg->low_water_bytes == 0)
    return 0;
  if (!backend_has_free_space (e->backend)) {
    dc_error ("low-water: the free space of backend %s (%s) is not known "
              "here (files and RBD pools report it; block devices and NBD "
              "servers do not, and a thin LV's pool is not visible from the "
              "LV): use low-water=off", backend_identity (e->backend)->name,
              backend_identity (e->backend)->kind);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

static uint64_t
threshold (const struct engine_config *cfg, uint64_t total)
{
  if (cfg->low_water_bytes)
    return cfg->low_water_bytes;
  return (uint64_t) ((double) total * cfg->low_water_ppm / 1000000.0);
}

/* Read the free space (lock dropped around the call) and log a change
 * of state once.
 */
static void
look_drops_lock (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock)
{
  struct backend *b = e->backend;
  uint64_t free_bytes, total, mark;
  int r;

  e->pressure_look_ns = now_ns + (e->pressure ? LOOK_UNDER_PRESSURE_NS
                                              : LOOK_EVERY_NS);
  engine_lock_release (e);
  r = backend_free_space (b, &free_bytes, &total);
  engine_lock_acquire (e);
  if (r == -1)
    return;                     /* reported; the state stays as it was */
  e->backend_free = free_bytes;
  e->backend_total = total;
  mark = threshold (engine_keys (e), total);
  if (!e->pressure && free_bytes < mark) {
    e->pressure = true;
    e->pressure_entered++;
    dc_error ("low-water: backend %s has %" PRIu64 " bytes free, below %"
              PRIu64 ": forwarding every pending discard now (%" PRIu64
              " bytes pending)", backend_identity (b)->name, free_bytes, mark,
              extmap_bytes (e->map));
  }
  else if (e->pressure && free_bytes >= mark) {
    e->pressure = false;
    dc_error ("low-water: backend %s has %" PRIu64 " bytes free again "
              "(mark %" PRIu64 "): back to delay and pacing",
              backend_identity (b)->name, free_bytes, mark);
  }
}

uint64_t
engine_pressure_turn_drops_lock (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock)
{
  uint64_t offset, length;
  uint32_t time;

  if (!backend_has_free_space (e->backend) ||
      (e->cfg.low_water_ppm == 0 && e->cfg.low_water_bytes == 0))
    return 0;
  if (now_ns >= e->pressure_look_ns)
    look_drops_lock (e, now_ns);
  /* An open breaker holds even under pressure: the device is in trouble
   * and its probe (engine-flusher.c) decides when discards go again.
   */
  if (!e->pressure || e->paused || e->forwarding_disabled ||
      breaker_holds (&e->breaker) ||
      !engine_pick_locked (e, UINT32_MAX, 0, &offset, &length, &time))
    return 0;
  if (engine_forward_drops_lock (e, offset, length, time, false, true) == 0)
    e->pressure_forwarded_bytes += length;
  return engine_now_ns (e);
}

void
engine_pressure_stats_locked (struct engine *e, struct engine_stats *st)
  REQUIRES (engine_lock)
{
  st->low_water_bytes = backend_has_free_space (e->backend)
                        ? threshold (&e->cfg, e->backend_total) : 0;
  st->backend_free_bytes = e->backend_free;
  st->pressure = e->pressure;
  st->pressure_entered = e->pressure_entered;
  st->pressure_forwarded_bytes = e->pressure_forwarded_bytes;
}

bool
engine_under_pressure (struct engine *e)
{
  bool pressure;

  engine_lock_acquire (e);
  pressure = e->pressure;
  engine_lock_release (e);
  return pressure;
}
