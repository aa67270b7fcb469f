/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: forwarding policy helpers (see policy.h). */
#include <config.h>

#include "arith.h"
#include "policy.h"
#include "verify.h"

bool
policy_aligned_part (uint64_t offset, uint64_t length, uint64_t granularity,
                     uint64_t *aligned_offset, uint64_t *aligned_length)
{
  /* Ends are at most 2^63 (extmap's bound), so rounding up cannot wrap. */
  uint64_t start, end;
  bool wraps = ADD_OVERFLOW (offset, length, &end);

  VERIFY (!wraps);
  VERIFY3U (end, <=, UINT64_C (1) << 63);
  start = round_up (offset, granularity);
  end = round_down (end, granularity);
  if (end <= start)
    return false;
  *aligned_offset = start;
  *aligned_length = end - start;
  return true;
}

uint64_t
policy_chunk_limit (uint64_t max_discard, uint64_t granularity)
{
  uint64_t limit = round_down (max_discard, granularity);

  return limit < granularity ? granularity : limit;
}
