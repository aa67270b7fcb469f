/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: invariant 11, the engine's side of what holds or checks
 * forwarding: the circuit breaker (breaker.h), the forwarding windows
 * (window.h), proof of effect (proof.h), and their statistics.  The
 * flusher and the stop call these; writes never do.
 */
#include <config.h>

#include <pthread.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"

/* A probe discards at most this much: small, so that a device in
 * trouble is asked little, yet large enough to time.
 */
#define PROBE_MAX_BYTES (UINT64_C (1) << 20)

void
engine_protection_init_locked (struct engine *e)
  REQUIRES (engine_lock)
{
  const struct engine_config *cfg = engine_keys (e);
  bool can_tell = backend_limits (e->backend)->can_extents;

  breaker_init (&e->breaker);
  /* The passthrough baseline is a plain proxy: nothing holds it. */
  if (cfg->passthrough) {
    e->cfg.breaker.errors = 0;
    e->cfg.breaker.latency_ms = 0;
  }
  /* A sample is valid only while the known-clean map vouches that no
   * write touched it since (proof.h).
   */
  proof_init (&e->proof, cfg->proof_ppm, cfg->proof_bytes,
              can_tell && clean_enabled (&e->clean));
  if (cfg->proof_ppm && !can_tell)
    dc_debug ("proof of effect: backend %s (%s) cannot say what a discard "
              "freed (no allocation status): not checked",
              backend_identity (e->backend)->name, backend_identity (e->backend)->kind);
  else if (cfg->proof_ppm && !clean_enabled (&e->clean))
    dc_debug ("proof of effect needs the known-clean map "
              "(max-clean-extents, not passthrough): not checked");
}

void
engine_breaker_probe_now_locked (struct engine *e)
  REQUIRES (engine_lock)
{
  if (e->breaker.state == BREAKER_OPEN)
    e->breaker.next_probe_ns = engine_now_ns (e);
}

uint64_t
engine_pick_limit_locked (struct engine *e)
  REQUIRES (engine_lock)
{
  uint64_t g = e->fwd_granularity;

  if (!breaker_holds (&e->breaker))
    return e->chunk_limit;
  return MIN (e->chunk_limit, MAX (round_down (PROBE_MAX_BYTES, g), g));
}

int
engine_send_or_probe_drops_lock (struct engine *e, uint64_t offset,
                                 uint64_t length, uint32_t time)
  REQUIRES (engine_lock)
{
  if (breaker_holds (&e->breaker))
    return engine_probe_drops_lock (e, offset, length, time);
  return engine_forward_drops_lock (e, offset, length, time, false, true);
}

uint64_t
engine_window_at_ns_locked (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock)
{
  const struct window_set *w = &engine_keys (e)->windows;

  if (w->n == 0 || e->pressure)
    return now_ns;
  return now_ns + window_ms_until_open_now (w) * 1000000;
}

void
engine_set_pressure (struct engine *e, bool pressure)
{
  engine_lock_acquire (e);
  e->pressure = pressure;
  pthread_cond_broadcast (&e->wakeup);
  engine_lock_release (e);
}

void
engine_protection_stats_locked (struct engine *e, struct engine_stats *st)
  REQUIRES (engine_lock)
{
  const struct breaker *b = &e->breaker;
  uint64_t now = engine_now_ns (e);

  st->breaker_state = breaker_state_name (b->state);
  st->breaker_reason = breaker_reason_name (b->reason);
  st->breaker_next_probe_ms = b->state == BREAKER_OPEN && b->next_probe_ns > now
    ? (b->next_probe_ns - now) / 1000000 : 0;
  st->breaker_opened = b->opened;
  st->breaker_probes = b->probes;
  st->breaker_errors = b->consecutive_errors;
  st->window_wait_ms = window_ms_until_open_now (&engine_keys (e)->windows);
  st->window_open = st->window_wait_ms == 0;
  st->proof_supported = e->proof.supported;
  st->proof_sample_ppm = e->proof.ppm;
  st->proof_checks = e->proof.checks;
  st->proof_checked_bytes = e->proof.checked_bytes;
  st->proof_ineffective_bytes = e->proof.ineffective_bytes;
  st->proof_skipped = e->proof.skipped;
  st->proof_adapted = e->proof.adapted;
}
