/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the extent map's self-check, for the test suite and the
 * fuzz target: every invariant of the tree, its summaries, its totals
 * and its pool, walked from the root.
 */
#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arith.h"
#include "extmap-internal.h"

struct check {
  size_t count, nodes;
  uint64_t bytes, prev_end, prev_value_end, aligned, subgranule;
  bool first;
};

static const char *
check_leaf (const struct extmap *map, const union node *n, struct check *c)
{
  for (unsigned j = 0; j < n->h.n; j++) {
    uint64_t off = n->leaf.offset[j], len = n->leaf.length[j], end;
    uint32_t v = n->leaf.time[j];

    if (len == 0 || ADD_OVERFLOW (off, len, &end) || end > EXTMAP_MAX_END)
      return "extent with a bad range";
    if (map->runs && v + len > (UINT64_C (1) << 32))
      return "run whose values pass 2^32";
    /* Runs may touch where their values do not continue. */
    if (!c->first && (off < c->prev_end ||
                      (off == c->prev_end &&
                       (!map->runs || c->prev_value_end == v))))
      return "extents out of order, overlapping or adjacent";
    c->first = false;
    c->prev_end = end;
    c->prev_value_end = v + len;
    c->count++;
    c->bytes += len;
    if (map->granularity) {
      uint64_t a = round_up (off, map->granularity);
      uint64_t b = round_down (end, map->granularity);

      if (b > a)
        c->aligned += b - a;
      else
        c->subgranule += len;
    }
  }
  return NULL;
}

static const char *
check_node (const struct extmap *map, const union node *n, unsigned l,
            bool is_root, struct check *c)
{
  const char *err;

  c->nodes++;
  if (n->h.n == 0)
    return "empty node";
  if (n->h.n > layout_at (l)->cap)
    return "overfull node";
  if (l == 0)
    return check_leaf (map, n, c);
  if (is_root && n->h.n < 2)
    return "inner root with a single child";
  for (unsigned i = 0; i < n->h.n; i++) {
    const union node *child = n->inner.child[i];
    struct elem s = extmap_summary (map, layout_at (l - 1), child);

    if (n->inner.key[i] != s.v[COL_START])
      return "key is not the child's first offset";
    if (n->inner.maxlen[i] != s.v[COL_LEN])
      return "maxlen is not the child's longest extent";
    if (n->inner.mintime[i] != s.v[COL_TIME])
      return "mintime is not the child's oldest time";
    if (n->inner.fwdtime[i] != s.v[COL_FWDTIME])
      return "fwdtime is not the child's oldest forwardable time";
    err = check_node (map, child, l - 1, false, c);
    if (err)
      return err;
  }
  return NULL;
}

const char *
extmap_check (const struct extmap *map)
{
  const struct pool *pool = &map->pool;
  struct check c = { .first = true };
  size_t used = 0, mapped = 0, empty = 0, nodes = 0;
  const char *err;

  if ((map->root == NULL) != (map->height == 0))
    return "root and height disagree";
  if (map->root != NULL) {
    err = check_node (map, map->root, map->height - 1, true, &c);
    if (err)
      return err;
  }
  if (c.count != map->count)
    return "count is wrong";
  if (c.bytes != map->bytes)
    return "bytes is wrong";
  if (c.aligned != map->aligned || c.subgranule != map->subgranule)
    return "granule totals are wrong";

  for (size_t i = 0; i < pool->nslabs; i++) {
    if (pool->slabs[i].nodes == NULL)
      continue;
    mapped++;
    nodes += pool->slabs[i].nnodes;
    used += pool->slabs[i].used;
    empty += pool->slabs[i].used == 0;
  }
  if (mapped != pool->mapped || empty != pool->empty ||
      nodes - used != pool->free_nodes)
    return "pool counters are wrong";
  if (used != c.nodes)
    return "nodes leaked";
  if (empty > 1)
    return "empty slabs kept";
  return NULL;
}

bool
extmap_check_covered (const struct extmap *map, uint64_t offset, uint64_t end)
{
  struct extent x, y;
  uint64_t x_end;

  if (!extmap_find_overlap (map, offset, end - offset, &x) ||
      x.offset > offset || (x_end = x.offset + x.length) < end)
    return false;
  if (map->runs)
    return true;               /* runs may touch (extmap.h) */
  if (x.offset > 0 && extmap_find_overlap (map, x.offset - 1, 1, &y))
    return false;
  return !extmap_find_from (map, x_end, &y) || y.offset > x_end;
}
