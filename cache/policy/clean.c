/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the known-clean map (see clean.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>

#include "arith.h"
#include "clean.h"
#include "log.h"
#include "policy.h"
#include "verify.h"

/* Rebase the mark counter long before it wraps (merges take the newest
 * time, so a wrapped counter would only disorder what is forgotten).
 */
#define SEQ_REBASE_AT (UINT32_C (1) << 31)
#define SEQ_REBASE_BY (UINT32_C (1) << 30)

int
clean_init (struct clean_map *c, uint64_t max_extents, uint64_t granularity)
{
  /* clean_written rounds to whole granules with masks. */
  VERIFY (max_extents == 0 || is_power_of_2 (granularity));
  *c = (struct clean_map) {
    .granularity = granularity, .max_extents = max_extents,
  };
  if (max_extents == 0)
    return 0;
  c->map = extmap_new ();
  if (c->map == NULL) {
    dc_error ("engine: out of memory for the known-clean map");
    return -1;
  }
  return 0;
}

void
clean_free (struct clean_map *c)
{
  extmap_free (c->map);
  c->map = NULL;
}

bool
clean_enabled (const struct clean_map *c)
{
  return c->map != NULL;
}

/* Keep the bound: forget the extents marked clean longest ago. */
static void
enforce_bound (struct clean_map *c)
{
  struct extent x;

  while (extmap_count (c->map) > c->max_extents &&
         extmap_oldest (c->map, &x)) {
    extmap_remove (c->map, x.offset, x.length, NULL);
    c->forgotten_bytes += x.length;
  }
  /* Invariant 3: removing a whole extent never allocates, so the bound
   * holds whatever memory there is.
   */
  VERIFY3U (extmap_count (c->map), <=, c->max_extents);
}

static uint32_t
next_seq (struct clean_map *c)
{
  if (c->seq >= SEQ_REBASE_AT) {
    extmap_rebase_time (c->map, SEQ_REBASE_BY);
    c->seq -= SEQ_REBASE_BY;
  }
  return c->seq++;
}

void
clean_discarded (struct clean_map *c, uint64_t offset, uint64_t length)
{
  uint64_t aoff, alen;

  if (c->map == NULL || length == 0 ||
      !policy_aligned_part (offset, length, c->granularity, &aoff, &alen))
    return;
  /* Not remembered is forgotten: the next TRIM of it goes out again. */
  if (extmap_insert (c->map, aoff, alen, next_seq (c)) == -1) {
    c->forgotten_bytes += alen;
    return;
  }
  enforce_bound (c);
}

/* Without memory to split an extent, forget every extent the range
 * touches whole: removing whole extents never allocates.
 */
static void
forget_overlapping (struct clean_map *c, uint64_t offset, uint64_t length)
{
  struct extent x;

  while (extmap_find_overlap (c->map, offset, length, &x)) {
    extmap_remove (c->map, x.offset, x.length, NULL);
    c->forgotten_bytes += x.length;
  }
}

bool
clean_written (struct clean_map *c, uint64_t offset, uint64_t length)
{
  uint64_t start, end, removed = 0;

  if (c->map == NULL || length == 0 || extmap_count (c->map) == 0)
    return false;
  /* Whole granules: a granule with data in it is not clean, and what is
   * left of it could never be discarded on its own.  Ends are at most
   * 2^63 (the backend's size), so rounding up cannot wrap.
   */
  start = round_down (offset, c->granularity);
  end = round_up (offset + length, c->granularity);
  if (extmap_remove (c->map, start, end - start, &removed) == -1) {
    forget_overlapping (c, start, end - start);
    removed = 1;
  }
  /* Invariant 9: nothing written is claimed clean. */
  DEBUG_VERIFY (!extmap_find_overlap (c->map, offset, length,
                                      &(struct extent) { 0 }));
  /* A split adds an extent. */
  enforce_bound (c);
  return removed > 0;
}

bool
clean_find (const struct clean_map *c, uint64_t offset, uint64_t length,
            uint64_t *start, uint64_t *end)
{
  struct extent x;

  if (c->map == NULL || length == 0 ||
      !extmap_find_overlap (c->map, offset, length, &x))
    return false;
  *start = MAX (x.offset, offset);
  *end = MIN (x.offset + x.length, offset + length);
  return true;
}

bool
clean_covers (const struct clean_map *c, uint64_t offset, uint64_t length)
{
  uint64_t pos = offset, end = offset + length, start, stop;

  if (length == 0)
    return false;
  while (pos < end) {
    if (!clean_find (c, pos, end - pos, &start, &stop) || start > pos)
      return false;
    pos = stop;
  }
  return true;
}

void
clean_forget_all (struct clean_map *c, uint64_t *extents, uint64_t *bytes)
{
  uint64_t n = clean_extents (c), b = clean_bytes (c);

  if (c->map)
    extmap_clear (c->map);
  if (extents)
    *extents = n;
  if (bytes)
    *bytes = b;
}

uint64_t
clean_extents (const struct clean_map *c)
{
  return c->map ? extmap_count (c->map) : 0;
}

uint64_t
clean_bytes (const struct clean_map *c)
{
  return c->map ? extmap_bytes (c->map) : 0;
}

uint64_t
clean_memory (const struct clean_map *c)
{
  return c->map ? extmap_memory (c->map) : 0;
}

int
clean_iterate (const struct clean_map *c, extmap_visit_fn fn, void *opaque)
{
  return c->map ? extmap_iterate (c->map, 0, fn, opaque) : 0;
}

void
clean_set_observer (struct clean_map *c, extmap_observer_fn fn, void *opaque)
{
  if (c->map)
    extmap_set_observer (c->map, fn, opaque);
}
