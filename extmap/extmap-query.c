/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the extent map's queries (extmap.h): finding and
 * iterating, the largest and the oldest extent (one descent each, by
 * the inner nodes' columns), the largest old enough (branch and bound)
 * and the totals.  None changes the map.
 */
#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arith.h"
#include "extmap-internal.h"

/* The first extent ending after offset, in *p. */
static bool
find_from (const struct extmap *map, uint64_t offset, struct path *p)
{
  if (map->root == NULL || offset >= EXTMAP_MAX_END)
    return false;               /* (and seek's offset + 1 cannot wrap) */
  extmap_seek (map, offset, false, p);
  return settle (map, p);
}

bool
extmap_find_overlap (const struct extmap *map, uint64_t offset,
                     uint64_t length, struct extent *out)
{
  struct path p;
  uint64_t end;

  if (length == 0)
    return false;
  if (ADD_OVERFLOW (offset, length, &end))
    end = UINT64_MAX;
  if (!find_from (map, offset, &p) ||
      p.node[0]->leaf.offset[p.idx[0]] >= end)
    return false;
  leaf_extent (p.node[0], p.idx[0], out);
  return true;
}

bool
extmap_find_from (const struct extmap *map, uint64_t offset,
                  struct extent *out)
{
  struct path p;

  if (!find_from (map, offset, &p))
    return false;
  leaf_extent (p.node[0], p.idx[0], out);
  return true;
}

int
extmap_iterate (const struct extmap *map, uint64_t offset,
                extmap_visit_fn fn, void *opaque)
{
  struct path p;

  if (!find_from (map, offset, &p))
    return 0;
  do {
    for (unsigned j = p.idx[0]; j < p.node[0]->h.n; j++) {
      struct extent e;
      int r;

      leaf_extent (p.node[0], j, &e);
      r = fn (&e, opaque);
      if (r != 0)
        return r;
    }
  } while (extmap_next_leaf (map->height, &p));
  return 0;
}

/* Follow, from the root, the first child whose column c holds the
 * root's summary value: the extent with the largest length (COL_LEN)
 * or the oldest time (COL_TIME), lowest offset first on ties.
 */
static bool
pick (const struct extmap *map, unsigned c, struct extent *out)
{
  const union node *n = map->root;
  uint64_t target;

  if (n == NULL)
    return false;
  target = extmap_summary (map, layout_at (map->height - 1), n).v[c];
  for (unsigned l = map->height - 1;; l--) {
    const struct layout *lay = layout_at (l);
    const unsigned char *base = col (lay, n, c);
    unsigned i = 0;

    while (val_load (base, lay->size[c], i) != target)
      i++;
    if (l == 0) {
      leaf_extent (n, i, out);
      return true;
    }
    n = n->inner.child[i];
  }
}

bool
extmap_largest (const struct extmap *map, struct extent *out)
{
  return pick (map, COL_LEN, out);
}

bool
extmap_oldest (const struct extmap *map, struct extent *out)
{
  return pick (map, COL_TIME, out);
}

bool
extmap_oldest_forwardable (const struct extmap *map, struct extent *out)
{
  const union node *n = map->root;
  uint32_t target;

  if (n == NULL)
    return false;
  target = extmap_summary (map, layout_at (map->height - 1), n).v[COL_FWDTIME];
  if (target == NO_TIME)
    return false;
  for (unsigned l = map->height - 1; l > 0; l--) {
    unsigned i = 0;

    while (n->inner.fwdtime[i] != target)
      i++;
    n = n->inner.child[i];
  }
  for (unsigned j = 0;; j++)
    if (n->leaf.time[j] == target &&
        forwardable (map, n->leaf.offset[j], n->leaf.length[j])) {
      leaf_extent (n, j, out);
      return true;
    }
}

struct best {
  uint32_t cutoff;
  uint64_t length;              /* 0 until one is found */
  uint64_t offset;
  const union node *leaf;
  unsigned j;
};

/* Could child i of inner node n hold something that beats the best so
 * far: old enough, and longer, or as long and at a lower offset?
 */
static inline bool
promising (const union node *n, unsigned i, const struct best *b)
{
  return n->inner.mintime[i] <= b->cutoff &&
    (n->inner.maxlen[i] > b->length ||
     (n->inner.maxlen[i] == b->length && n->inner.key[i] < b->offset));
}

/* The search of extmap_largest_aligned_before, branch and bound.  In
 * each inner node the child with the longest extent among those that
 * may hold a qualifying one goes first, so that a long candidate is
 * found early and bounds the rest; the others follow in address order.
 * Qualifying: old enough, at least minlen long, holding a whole
 * granule; children are skipped by what their columns rule out.
 */
struct aligned_best {
  struct best b;
  uint64_t minlen;              /* the caller's */
  uint64_t shortest;            /* no shorter extent can qualify */
  bool by_fwdtime;              /* qualifying implies forwardable */
};

static inline bool
aligned_promising (const union node *n, unsigned i,
                   const struct aligned_best *a)
{
  return n->inner.maxlen[i] >= a->shortest &&
    (!a->by_fwdtime || n->inner.fwdtime[i] <= a->b.cutoff) &&
    promising (n, i, &a->b);
}

static void
aligned_best_before (const struct extmap *map, const union node *n,
                     unsigned l, struct aligned_best *a)
{
  struct best *b = &a->b;
  unsigned first = n->h.n;
  uint64_t top = 0;

  if (l == 0) {
    for (unsigned j = 0; j < n->h.n; j++) {
      uint64_t len = n->leaf.length[j], off = n->leaf.offset[j];

      if (n->leaf.time[j] <= b->cutoff && len >= a->minlen &&
          (len > b->length || (len == b->length && off < b->offset)) &&
          holds_granule (off, len, map->granularity)) {
        b->length = len;
        b->offset = off;
        b->leaf = n;
        b->j = j;
      }
    }
    return;
  }
  for (unsigned i = 0; i < n->h.n; i++) {
    if (aligned_promising (n, i, a) && n->inner.maxlen[i] > top) {
      top = n->inner.maxlen[i];
      first = i;
    }
  }
  if (first == n->h.n)
    return;
  aligned_best_before (map, n->inner.child[first], l - 1, a);
  for (unsigned i = 0; i < n->h.n; i++) {
    if (i != first && aligned_promising (n, i, a))
      aligned_best_before (map, n->inner.child[i], l - 1, a);
  }
}

bool
extmap_largest_aligned_before (const struct extmap *map, uint32_t cutoff,
                               uint64_t minlen, struct extent *out)
{
  struct aligned_best a = {
    .b = { .cutoff = cutoff },
    .minlen = minlen,
    .shortest = MAX (MAX (minlen, map->granularity), UINT64_C (1)),
    .by_fwdtime = minlen >= map->minlen,
  };

  if (map->root == NULL || map->granularity == 0)
    return false;
  aligned_best_before (map, map->root, map->height - 1, &a);
  if (a.b.length == 0)
    return false;
  leaf_extent (a.b.leaf, a.b.j, out);
  return true;
}

size_t
extmap_count (const struct extmap *map)
{
  return map->count;
}

uint64_t
extmap_bytes (const struct extmap *map)
{
  return map->bytes;
}

uint64_t
extmap_aligned_bytes (const struct extmap *map)
{
  return map->aligned;
}

uint64_t
extmap_subgranule_bytes (const struct extmap *map)
{
  return map->subgranule;
}

size_t
extmap_memory (const struct extmap *map)
{
  const struct pool *pool = &map->pool;

  return sizeof *map + pool->bytes +
    pool->cap * sizeof *pool->slabs + pool->cap / 8;
}
