/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: a reference model of the extent map that is
 * trivially correct, a sorted array of extents merged and split by
 * linear scans, and the same queries as extmap.h.  The differential
 * test (test-extmap-diff.c) and the fuzz target (tests/fuzz/
 * fuzz-extmap.c) both check the B+tree against it.
 */
#ifndef DISCARDCACHE_EXTMAP_REF_H
#define DISCARDCACHE_EXTMAP_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extmap.h"

struct extmap_ref {
  struct extent *v;             /* sorted by offset, disjoint, not touching */
  size_t n, cap;
  bool runs;                    /* a map of runs: touching where values
                                   do not continue */
  uint64_t granularity;         /* as the map's, for the totals (0: none) */
  uint64_t minlen;              /* as the map's (extmap_set_minlen) */
};

/* The same validation as extmap.h states it: length > 0, no overflow,
 * end at most EXTMAP_MAX_END.
 */
extern bool ref_valid (uint64_t offset, uint64_t length);

/* extmap_insert and extmap_remove (which returns the bytes removed) on
 * a valid range.  Abort when out of memory.  A map of runs refuses an
 * insert that overlaps or whose values pass 2^32: ref_insert returns
 * -1 then (and 0 otherwise), changing nothing.
 */
extern int ref_insert (struct extmap_ref *r, uint64_t offset,
                       uint64_t length, uint32_t time);
extern uint64_t ref_remove (struct extmap_ref *r, uint64_t offset,
                            uint64_t length);
extern void ref_rebase_time (struct extmap_ref *r, uint32_t delta);
extern void ref_clear (struct extmap_ref *r);
extern void ref_free (struct extmap_ref *r);

extern uint64_t ref_bytes (const struct extmap_ref *r);

/* The queries, NULL when there is no answer. */
extern const struct extent *ref_find (const struct extmap_ref *r,
                                      uint64_t x, uint64_t end);
extern const struct extent *ref_largest_before (const struct extmap_ref *r,
                                                uint32_t cutoff);
extern const struct extent *ref_oldest (const struct extmap_ref *r);
/* Forwardable: holding a whole granule and at least r->minlen long;
 * as the map's query, extents at time UINT32_MAX are not found.
 */
extern const struct extent *ref_oldest_forwardable (const struct extmap_ref *r);
extern const struct extent *ref_largest_aligned_before
  (const struct extmap_ref *r, uint32_t cutoff, uint64_t minlen);

/* ---- the map against the reference ---- */

enum ref_query {
  REF_LARGEST, REF_OLDEST, REF_FIND_OVERLAP,
  REF_FIND_FROM, REF_ITERATE, REF_OLDEST_FORWARDABLE,
  REF_LARGEST_ALIGNED_BEFORE, REF_QUERIES
};
extern const char *const ref_query_names[REF_QUERIES];

/* The arguments a query uses: x and len (find_overlap), x (find_from,
 * iterate, which stops after stop_after extents), cutoff and minlen
 * (largest_aligned_before).
 */
struct ref_query_args {
  uint64_t x, len;
  uint32_t cutoff;
  uint64_t minlen;
  size_t stop_after;
};

/* Ask the map and the reference the same query.  NULL if they agree,
 * else what differs (in a buffer valid until the next call).
 */
extern const char *ref_check_query (const struct extmap *map,
                                    const struct extmap_ref *r,
                                    enum ref_query q,
                                    const struct ref_query_args *a);

/* Everything: the tree's invariants (extmap_check), the content in
 * order, the count, the bytes and the granule totals.  NULL or what
 * differs.
 */
extern const char *ref_check_all (const struct extmap *map,
                                  const struct extmap_ref *r);

#endif /* DISCARDCACHE_EXTMAP_REF_H */
