/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: proof of effect's sample queue (see proof.h): pure, no
 * lock; the engine's side (the check, the log line, proof-adapt) is
 * cache/engine/engine-proof.c.
 */
#include <config.h>

#include <string.h>

#include "arith.h"
#include "policy.h"
#include "proof.h"
#include "verify.h"

#define PPM_ONE UINT64_C (1000000)

void
proof_init (struct proof *p, uint64_t ppm, uint64_t max_bytes, bool supported)
{
  memset (p, 0, sizeof *p);
  p->ppm = supported ? ppm : 0;
  p->max_bytes = max_bytes;
  p->supported = supported;
}

bool
proof_enabled (const struct proof *p)
{
  return p->ppm > 0 && p->max_bytes > 0;
}

void
proof_offer (struct proof *p, uint64_t offset, uint64_t length,
             uint64_t granularity)
{
  uint64_t off, len;

  if (!proof_enabled (p))
    return;
  /* The forwarding granularity: the sample is cut to it with masks. */
  VERIFY (is_power_of_2 (granularity));
  p->credit += p->ppm;
  if (p->credit < PPM_ONE)
    return;
  p->credit -= PPM_ONE;
  /* Whole granules only (a FUA trim need not be aligned): less than one
   * would not have been freed.
   */
  if (!policy_aligned_part (offset, length, granularity, &off, &len))
    return;
  len = round_down (MIN (len, p->max_bytes), granularity);
  if (len == 0)
    return;
  if (p->n == PROOF_QUEUE) {
    p->skipped++;
    return;
  }
  /* A sample is part of what was discarded, or proof would check (and
   * count as ineffective) space a client may have written.
   */
  VERIFY3U (off, >=, offset);
  VERIFY3U (off + len, <=, offset + length);
  p->q[(p->head + p->n) % PROOF_QUEUE] = (struct proof_sample) {
    .offset = off, .length = len, .granularity = granularity,
  };
  p->n++;
}

bool
proof_take (struct proof *p, struct proof_sample *s)
{
  if (p->n == 0)
    return false;
  *s = p->q[p->head];
  p->head = (p->head + 1) % PROOF_QUEUE;
  p->n--;
  return true;
}

bool
proof_queued (const struct proof *p)
{
  return p->n > 0;
}
