/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the engine's side of proof of effect (the sample queue
 * is protect/proof.c): the flusher's check of one sample, the log line,
 * proof-adapt.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "arith.h"
#include "engine-internal.h"
#include "log.h"
#include "policy.h"
#include "proof.h"

/* The first ineffective result, once, with the likely cause. */
static void
say_ineffective (struct engine *e, const struct proof_sample *s,
                 uint64_t allocated)
  REQUIRES (engine_lock)
{
  const char *cause;

  if (e->proof.ineffective_said)
    return;
  e->proof.ineffective_said = true;
  if (allocated < s->length)
    cause = "granularity or alignment: the store freed part of the range, "
      "so it frees only larger or differently aligned units";
  else
    cause = "the store ignores discards of this size or alignment "
      "(granularity), or ignores discards altogether";
  dc_error ("proof of effect: backend %s acknowledged a discard of [%" PRIu64
            ", +%" PRIu64 ") at granularity %" PRIu64 " but %" PRIu64
            " bytes of it are still allocated; likely cause: %s%s "
            "(said once; the statistics count proof_ineffective_bytes)",
            backend_identity (e->backend)->name, s->offset, s->length, s->granularity,
            allocated, cause,
            engine_keys (e)->proof_adapt ? ""
            : "; proof-adapt=on raises the forwarding granularity");
}

/* proof-adapt=on: a discard at the granularity in force freed nothing
 * whole: forward in granules twice as large, up to PROOF_ADAPT_MAX and
 * one chunk.  The map then counts finer pending pieces as sub-granule.
 */
static void
adapt_locked (struct engine *e, const struct proof_sample *s)
  REQUIRES (engine_lock)
{
  uint64_t g = e->fwd_granularity;

  if (!engine_keys (e)->proof_adapt || s->granularity != g)
    return;
  if (g * 2 > PROOF_ADAPT_MAX || g * 2 > e->chunk_limit) {
    if (!e->proof.adapt_max_said)
      dc_error ("proof-adapt: discards at granularity %" PRIu64 " are still "
                "ineffective and it is not raised further: the backend "
                "seems to ignore discards", g);
    e->proof.adapt_max_said = true;
    return;
  }
  e->fwd_granularity = g * 2;
  extmap_set_granularity (e->map, e->fwd_granularity);
  e->proof.adapted++;
  dc_error ("proof-adapt: discards at granularity %" PRIu64 " were "
            "ineffective on backend %s: forwarding granularity raised to %"
            PRIu64, g, backend_identity (e->backend)->name, e->fwd_granularity);
}

void
engine_proof_turn_drops_lock (struct engine *e)
  REQUIRES (engine_lock)
{
  struct proof_sample s;
  uint64_t allocated;
  int r;

  if (!proof_take (&e->proof, &s))
    return;
  engine_lock_release (e);
  r = backend_range_allocated (e->backend, s.offset, s.length, &allocated);
  engine_lock_acquire (e);
  /* Invariant 11: a write since the discard (it took the range out of
   * the known-clean map before reaching the backend) voids the sample.
   */
  if (r == -1 || !clean_covers (&e->clean, s.offset, s.length)) {
    e->proof.skipped++;
    return;
  }
  e->proof.checks++;
  e->proof.checked_bytes += s.length;
  if (allocated == 0)
    return;
  e->proof.ineffective_bytes += allocated;
  say_ineffective (e, &s, allocated);
  adapt_locked (e, &s);
}
