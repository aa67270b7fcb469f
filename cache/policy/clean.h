/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the known-clean map (invariant 9, discard once): the
 * ranges the backend has discarded and nothing has written since, in
 * whole granules, kept in a second extent map.  The engine asks it
 * before recording a TRIM (what is clean is acknowledged, not sent
 * again), tells it what the backend discarded, and takes out every
 * granule a write or zero touches before that reaches the backend.
 *
 * Memory is bounded: past max_extents the range marked clean longest
 * ago is forgotten, which costs a repeated discard later, never data.
 * Without memory for a split, a write forgets the whole extents it
 * touches.  Times in the map are a counter of marks, not a clock, so
 * "oldest" is "marked clean longest ago" and needs no rebasing.
 *
 * Not thread-safe: the engine's lock guards it.  With max_extents 0 the
 * map is off: nothing is clean, every call is cheap.
 */
#ifndef DISCARDCACHE_CLEAN_H
#define DISCARDCACHE_CLEAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extmap.h"

struct clean_map {
  struct extmap *map;          /* NULL: off */
  uint64_t granularity;        /* a power of two */
  uint64_t max_extents;
  uint32_t seq;                /* the time of the next mark */
  uint64_t forgotten_bytes;    /* clean bytes given up (bound, no memory) */
};

/* Set up c for granules of granularity bytes; max_extents 0: off.
 * Returns 0, or -1 with errno (ENOMEM, reported).
 */
extern int clean_init (struct clean_map *c, uint64_t max_extents,
                       uint64_t granularity)
  __attribute__ ((nonnull (1)));

/* Free the map (c itself is the caller's).  Safe after a failed init. */
extern void clean_free (struct clean_map *c) __attribute__ ((nonnull (1)));

/* Whether the map is kept (max-clean-extents is not off). */
extern bool clean_enabled (const struct clean_map *c)
  __attribute__ ((nonnull (1)));

/* The backend discarded [offset, offset+length): its whole granules are
 * clean now (the unaligned head and tail are not).
 */
extern void clean_discarded (struct clean_map *c, uint64_t offset,
                             uint64_t length)
  __attribute__ ((nonnull (1)));

/* [offset, offset+length) is about to be written or zeroed: no granule
 * it touches is clean any more.  Never fails (invariant 1).  Whether it
 * changed the map.
 */
extern bool clean_written (struct clean_map *c, uint64_t offset,
                           uint64_t length)
  __attribute__ ((nonnull (1)));

/* The first clean range overlapping [offset, offset+length), clipped to
 * it, as [*start, *end).  False if there is none.
 */
extern bool clean_find (const struct clean_map *c, uint64_t offset,
                        uint64_t length, uint64_t *start, uint64_t *end)
  __attribute__ ((nonnull (1, 4, 5)));

/* Whether every byte of [offset, offset+length) is clean. */
extern bool clean_covers (const struct clean_map *c, uint64_t offset,
                          uint64_t length)
  __attribute__ ((nonnull (1)));

/* Forget every clean range (discardctl forget-clean): stores how many
 * extents and bytes were forgotten (either may be NULL).
 */
extern void clean_forget_all (struct clean_map *c, uint64_t *extents,
                              uint64_t *bytes)
  __attribute__ ((nonnull (1)));

/* The map's extents, bytes and memory (0 when off). */
extern uint64_t clean_extents (const struct clean_map *c)
  __attribute__ ((nonnull (1)));
extern uint64_t clean_bytes (const struct clean_map *c)
  __attribute__ ((nonnull (1)));
extern uint64_t clean_memory (const struct clean_map *c)
  __attribute__ ((nonnull (1)));

/* Report every change of the map to fn (the journal; extmap.h). */
extern void clean_set_observer (struct clean_map *c, extmap_observer_fn fn,
                                void *opaque)
  __attribute__ ((nonnull (1)));

/* Call fn for each clean extent in address order (the state file). */
extern int clean_iterate (const struct clean_map *c, extmap_visit_fn fn,
                          void *opaque)
  __attribute__ ((nonnull (1, 2)));

#endif /* DISCARDCACHE_CLEAN_H */
