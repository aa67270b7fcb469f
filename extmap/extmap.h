/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the extent map, a set of disjoint byte ranges with the
 * time each was queued, kept in a B+tree whose inner nodes carry every
 * child's largest length and oldest time, so the largest and the oldest
 * extent are found in O(height).
 *
 * The same tree also holds runs (extmap_new_runs): each extent maps
 * [offset, offset+length) onto [value, value+length) of another space
 * (thin mode's logical slots onto physical ones), the value in struct
 * extent's value (which shares its storage with time).  Runs merge only when both spaces continue, and a cut
 * shifts the value of what remains after it.
 *
 * Not thread-safe: the engine serialises access with its own lock.
 * Offsets and ends are at most EXTMAP_MAX_END (2^63).  Times are opaque
 * 32-bit ticks chosen by the caller (the engine uses milliseconds since
 * its start and calls extmap_rebase_time long before they wrap).
 * Functions returning int return 0 on success or -1 with errno set
 * (EINVAL for a bad range, ENOMEM when a node cannot be allocated; on
 * ENOMEM the map is unchanged).
 */
#ifndef DISCARDCACHE_EXTMAP_H
#define DISCARDCACHE_EXTMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXTMAP_MAX_END (UINT64_C (1) << 63)

struct extmap;

struct extent {
  uint64_t offset;
  uint64_t length;
  union {
    uint32_t time;              /* a map of extents: when it was queued */
    uint32_t value;             /* a map of runs (or one used as an
                                   index): what offset maps to */
  };
};

/* Create an empty map, or NULL with errno set. */
extern struct extmap *extmap_new (void);

/* Create an empty map of runs.  Its extmap_insert refuses a range that
 * overlaps an extent (EINVAL) or whose value + length passes 2^32, and
 * merges it with a neighbour only where offsets and values both
 * continue; extmap_remove keeps the head of a cut run at its value and
 * moves the tail's value along.  The queries that speak of times
 * (largest_aligned_before, oldest, rebase_time) have no meaning for runs.
 */
extern struct extmap *extmap_new_runs (void);

/* Free the map and all its nodes.  NULL is allowed. */
extern void extmap_free (struct extmap *map);

/* Remove every extent and release the nodes. */
extern void extmap_clear (struct extmap *map) __attribute__ ((nonnull (1)));

/* Add [offset, offset+length) queued at time.  Overlapping and adjacent
 * extents merge into one, which takes the newest time of its parts
 * (a range that grows waits its full delay again).  length 0 or an end
 * past EXTMAP_MAX_END is EINVAL.
 */
extern int extmap_insert (struct extmap *map, uint64_t offset,
                          uint64_t length, uint32_t time)
  __attribute__ ((nonnull (1)));

/* Remove [offset, offset+length) from every extent it overlaps,
 * splitting an extent in two where the range falls inside it.  Stores
 * the number of bytes actually removed in *removed (may be NULL).
 * length 0 or an end past EXTMAP_MAX_END is EINVAL.
 */
extern int extmap_remove (struct extmap *map, uint64_t offset,
                          uint64_t length, uint64_t *removed)
  __attribute__ ((nonnull (1)));

/* Find the first extent (lowest offset) that overlaps
 * [offset, offset+length).  Returns true and fills *out if one exists.
 */
extern bool extmap_find_overlap (const struct extmap *map, uint64_t offset,
                                 uint64_t length, struct extent *out)
  __attribute__ ((nonnull (1, 4)));

/* Find the first extent that ends after offset (it contains offset or
 * starts after it): the cursor for iterating in address order.
 */
extern bool extmap_find_from (const struct extmap *map, uint64_t offset,
                              struct extent *out)
  __attribute__ ((nonnull (1, 3)));

/* Call fn for each extent ending after offset, in address order, until
 * fn returns non-zero (that value is returned) or the extents run out
 * (returns 0).  fn must not modify the map.
 */
typedef int (*extmap_visit_fn) (const struct extent *e, void *opaque);
extern int extmap_iterate (const struct extmap *map, uint64_t offset,
                           extmap_visit_fn fn, void *opaque)
  __attribute__ ((nonnull (1, 3)));

/* The longest extent (ties: lowest offset).  False if the map is empty. */
extern bool extmap_largest (const struct extmap *map, struct extent *out)
  __attribute__ ((nonnull (1, 2)));

/* The extent with the smallest time (ties: lowest offset). */
extern bool extmap_oldest (const struct extmap *map, struct extent *out)
  __attribute__ ((nonnull (1, 2)));

/* Forwardable extents: those holding a whole granule of the map's
 * granularity (extmap_set_granularity; with none, no extent is) and at
 * least minlen long (extmap_set_minlen, 0 at first).  The inner nodes
 * keep each child's oldest forwardable time, so the flusher learns in
 * O(height) when the next one comes of age.
 */
extern void extmap_set_minlen (struct extmap *map, uint64_t minlen)
  __attribute__ ((nonnull (1)));

/* The forwardable extent with the smallest time (ties: lowest offset).
 * UINT32_MAX marks "none" in the inner nodes: an extent queued at time
 * UINT32_MAX is not found by this query (the engine's ticks never come
 * near it).  O(height).
 */
extern bool extmap_oldest_forwardable (const struct extmap *map,
                                       struct extent *out)
  __attribute__ ((nonnull (1, 2)));

/* The longest extent (ties: lowest offset) whose time is at most
 * cutoff, at least minlen long (this call's, not the map's) and holding
 * a whole granule: what the flusher forwards next.  A branch-and-bound
 * descent that skips subtrees whose oldest time is after cutoff, whose
 * longest extent cannot beat the best found so far or is shorter than a
 * granule or than minlen, and, when minlen is at least the map's, those
 * whose oldest forwardable extent is after cutoff.
 */
extern bool extmap_largest_aligned_before (const struct extmap *map,
                                           uint32_t cutoff, uint64_t minlen,
                                           struct extent *out)
  __attribute__ ((nonnull (1, 4)));

/* Number of extents, and total bytes they cover. */
extern size_t extmap_count (const struct extmap *map)
  __attribute__ ((nonnull (1)));
extern uint64_t extmap_bytes (const struct extmap *map)
  __attribute__ ((nonnull (1)));

/* Account every extent against granules of g bytes (a power of two, or
 * 0 to stop): extmap_aligned_bytes is then the sum of each extent's
 * granule-aligned part (rounded inward), extmap_subgranule_bytes the
 * sum of the lengths of those that hold no whole granule.  Both are
 * kept up to date by every change, so reading them costs nothing;
 * setting g walks the map once (as does extmap_set_minlen).
 */
extern void extmap_set_granularity (struct extmap *map, uint64_t g)
  __attribute__ ((nonnull (1)));
extern uint64_t extmap_aligned_bytes (const struct extmap *map)
  __attribute__ ((nonnull (1)));
extern uint64_t extmap_subgranule_bytes (const struct extmap *map)
  __attribute__ ((nonnull (1)));

/* Bytes of memory the map holds now (nodes, pools, the struct itself),
 * for statistics and the memory benchmark.
 */
extern size_t extmap_memory (const struct extmap *map)
  __attribute__ ((nonnull (1)));

/* An observer of the set's changes: called after every extmap_insert
 * (EXTMAP_OBSERVE_INSERT), every extmap_remove that removed something
 * (EXTMAP_OBSERVE_REMOVE, the range asked for) and every extmap_clear
 * (offset and length 0), with the arguments of the call, so that
 * replaying the calls in order on another map rebuilds the same set
 * (the engine's journal, cache/persist/journal.h).  Times are not reported.
 * NULL fn stops observing.
 */
enum extmap_observe_op {
  EXTMAP_OBSERVE_INSERT = 1, EXTMAP_OBSERVE_REMOVE, EXTMAP_OBSERVE_CLEAR,
};
typedef void (*extmap_observer_fn) (void *opaque, enum extmap_observe_op op,
                                    uint64_t offset, uint64_t length);
extern void extmap_set_observer (struct extmap *map, extmap_observer_fn fn,
                                 void *opaque)
  __attribute__ ((nonnull (1)));

/* Subtract delta from every extent's time (saturating at 0), so the
 * caller can keep its ticks from wrapping.  O(n), rare.
 */
extern void extmap_rebase_time (struct extmap *map, uint32_t delta)
  __attribute__ ((nonnull (1)));

#endif /* DISCARDCACHE_EXTMAP_H */
