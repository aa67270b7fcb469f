/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the small-extent policy (see small.h): pure functions of
 * the cost model, so its thresholds are tested on their own.
 */
#include <config.h>

#include <stdbool.h>
#include <stdint.h>

#include "arith.h"
#include "small.h"

static bool
model_known (const struct pace_model *m)
{
  return m->valid && m->samples >= SMALL_AUTO_MIN_SAMPLES;
}

uint64_t
small_auto_threshold (const struct pace_model *m, uint64_t granularity)
{
  double limit = SMALL_AUTO_MAX;
  uint64_t t;

  if (!model_known (m) || m->a_us < SMALL_AUTO_MIN_COST_US)
    return 0;
  if (m->b_us_per_byte > 0 && m->a_us / m->b_us_per_byte < limit)
    limit = m->a_us / m->b_us_per_byte;
  if (limit < 1)
    return 0;
  t = UINT64_C (1) << (63 - __builtin_clzll ((uint64_t) limit));
  return MAX (t, granularity);
}

bool
small_join_pays (const struct pace_model *m, uint64_t gap)
{
  return model_known (m) && m->a_us >= SMALL_AUTO_MIN_COST_US &&
         m->b_us_per_byte * (double) gap < m->a_us;
}
