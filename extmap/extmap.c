/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the extent map (extmap.h) on a B+tree: its core, the
 * nodes and the insert and remove that keep them balanced and their
 * summaries true (the node pool is extmap-pool.c, the queries
 * extmap-query.c, the self-check extmap-check.c; extmap-internal.h is
 * what they share).
 *
 * Nodes.  Every node is one 512-byte slot.  A leaf holds up to 25
 * extents as three parallel arrays (offset[], length[], time[]): 20
 * bytes an extent, and a search touches only the offset[] lines.  An
 * inner node holds up to 15 children, and for each the first offset
 * under it (the search key), the longest extent under it, the oldest
 * time under it, and the oldest time of a forwardable extent under it
 * (one that holds a whole granule and is at least minlen long, for the
 * granularity and minlen the map was given); these make "largest",
 * "oldest" and "oldest forwardable" a single descent, and bound the
 * search of extmap_largest_aligned_before.
 * (The fourth column took the inner fan-out from 18 to 15: inner nodes
 * are a twentieth of the nodes, so memory per extent barely moves.)
 *
 * Both kinds are "columns of elements" (a leaf element is an extent, an
 * inner element is a child entry), so moving, splitting and merging are
 * written once over a small layout table instead of once per kind.
 *
 * Fill.  The memory target (at most 32 bytes an extent, everything
 * included) needs leaves about 80% full on average, where a textbook
 * B-tree under random inserts settles near 69%.  So a full node first
 * shares its elements with its neighbours (B*-tree style) and only
 * splits when the whole window of up to three siblings is full (three
 * nodes become four); a node that falls below half full takes from or
 * merges with its neighbours.  An insert past the last element of the
 * last child (ascending appends, how a filesystem trims in order) opens
 * a new node holding just that element, so the nodes it leaves behind
 * stay 100% full.  No first-element offset as in OpenZFS's btree: with
 * 25 elements a memmove is a few cache lines at most.
 *
 * Memory.  Nodes come from the pool of extmap-pool.c: slabs mapped
 * with mmap, given back to the kernel as soon as they are empty.
 *
 * Failure.  The only allocations are nodes, one per level at most when
 * an insert splits its way to the root, and each modifying operation
 * reserves them in the pool before it changes anything: ENOMEM leaves
 * the map as it was.
 */

#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "extmap-internal.h"
#include "verify.h"

/* Largest number of elements gathered when siblings are rebalanced:
 * three full nodes and the element being inserted.
 */
#define GATHER_MAX (3 * (LEAF_CAP > INNER_CAP ? LEAF_CAP : INNER_CAP) + 1)

const struct layout extmap_leaf_layout = {
  .cap = LEAF_CAP,
  .min = LEAF_CAP / 2,
  .ncols = 3,
  .off = { offsetof (struct leaf, offset), offsetof (struct leaf, length),
           offsetof (struct leaf, time) },
  .size = { 8, 8, 4 },
};

const struct layout extmap_inner_layout = {
  .cap = INNER_CAP,
  .min = INNER_CAP / 2,
  .ncols = 5,
  .off = { offsetof (struct inner, key), offsetof (struct inner, maxlen),
           offsetof (struct inner, mintime), offsetof (struct inner, child),
           offsetof (struct inner, fwdtime) },
  .size = { 8, 8, 4, sizeof (union node *), 4 },
};

static void
observe (const struct extmap *map, enum extmap_observe_op op,
         uint64_t offset, uint64_t length)
{
  if (map->observer)
    map->observer (map->observer_opaque, op, offset, length);
}

/* An element to insert at index j of child ci while rebalancing. */
struct pending {
  unsigned ci, j;
  const struct elem *e;
};

/* Elements of up to three siblings, gathered column by column. */
struct gather {
  unsigned n;
  unsigned char col[MAX_COLS][GATHER_MAX * sizeof (uint64_t)];
};

/* ---- columns ---- */

static void
elem_store (const struct layout *lay, union node *n, unsigned i,
            const struct elem *e)
{
  for (unsigned c = 0; c < lay->ncols; c++)
    val_store (col (lay, n, c), lay->size[c], i, e->v[c]);
}

/* Move cnt elements, overlapping or not, from src[si] to dst[di]. */
static void
cols_move (const struct layout *lay, union node *dst, unsigned di,
           const union node *src, unsigned si, unsigned cnt)
{
  for (unsigned c = 0; c < lay->ncols; c++) {
    unsigned sz = lay->size[c];
    memmove (col (lay, dst, c) + di * sz, col (lay, src, c) + si * sz,
             (size_t) cnt * sz);
  }
}

/* Delete cnt elements of n from index j. */
static void
node_cut (const struct layout *lay, union node *n, unsigned j, unsigned cnt)
{
  cols_move (lay, n, j, n, j + cnt, n->h.n - j - cnt);
  n->h.n -= cnt;
}

/* What the parent records about a node: first offset, longest extent,
 * oldest time, oldest time of a forwardable extent (COL_CHILD is left
 * for the caller).
 */
struct elem
extmap_summary (const struct extmap *map, const struct layout *lay,
         const union node *n)
{
  const uint64_t *start = (const uint64_t *) col (lay, n, COL_START);
  const uint64_t *len = (const uint64_t *) col (lay, n, COL_LEN);
  const uint32_t *time = (const uint32_t *) col (lay, n, COL_TIME);
  struct elem s = { { start[0], len[0], time[0], 0, NO_TIME } };

  for (unsigned i = 1; i < n->h.n; i++) {
    s.v[COL_LEN] = MAX (s.v[COL_LEN], len[i]);
    s.v[COL_TIME] = MIN (s.v[COL_TIME], time[i]);
  }
  if (lay == &extmap_inner_layout) {
    for (unsigned i = 0; i < n->h.n; i++)
      s.v[COL_FWDTIME] = MIN (s.v[COL_FWDTIME], (uint64_t) n->inner.fwdtime[i]);
  }
  else {
    for (unsigned i = 0; i < n->h.n; i++)
      if (time[i] < s.v[COL_FWDTIME] && forwardable (map, start[i], len[i]))
        s.v[COL_FWDTIME] = time[i];
  }
  return s;
}

/* Record summary s as child i's in inner node parent. */
void
extmap_set_summary (struct inner *parent, unsigned i, const struct elem *s)
{
  parent->key[i] = s->v[COL_START];
  parent->maxlen[i] = s->v[COL_LEN];
  parent->mintime[i] = s->v[COL_TIME];
  parent->fwdtime[i] = s->v[COL_FWDTIME];
}

static bool
same_summary (const struct inner *parent, unsigned i, const struct elem *s)
{
  return parent->key[i] == s->v[COL_START] &&
    parent->maxlen[i] == s->v[COL_LEN] &&
    parent->mintime[i] == s->v[COL_TIME] &&
    parent->fwdtime[i] == s->v[COL_FWDTIME];
}

static struct elem
entry_of (const struct extmap *map, const struct layout *lay, union node *n)
{
  struct elem e = extmap_summary (map, lay, n);

  e.v[COL_CHILD] = (uintptr_t) n;
  return e;
}

/* ---- searching ---- */

/* How many of the n sorted values are below x.  A linear count, not a
 * binary search: in a big map the node is not in cache, and the linear
 * loads are independent, so their misses overlap, where each step of a
 * binary search waits for the one before (queries at 2 million extents
 * took 12% less time here).  No branch to mispredict either.
 */
static inline unsigned
count_below (const uint64_t *a, unsigned n, uint64_t x)
{
  unsigned c = 0;

  for (unsigned i = 0; i < n; i++)
    c += a[i] < x;
  return c;
}

/* Start fetching all of a node as soon as it is known: searching it and
 * updating it will touch most of its lines.
 */
static inline void
prefetch_node (const union node *n)
{
  for (size_t off = 0; off < sizeof *n; off += 64)
    __builtin_prefetch ((const char *) n + off);
}

/* Walk from the root to the leaf where an extent starting at x belongs:
 * in each inner node the last child whose first offset is below x.
 * The leaf index counts that leaf's extents starting below x, so it may
 * equal n.  The map must not be empty.
 */
static void
descend (const struct extmap *map, uint64_t x, struct path *p)
{
  union node *n = map->root;

  for (unsigned l = map->height - 1; l > 0; l--) {
    unsigned i = count_below (n->inner.key + 1, n->h.n - 1, x);

    p->node[l] = n;
    p->idx[l] = i;
    n = n->inner.child[i];
    prefetch_node (n);
  }
  p->node[0] = n;
  p->idx[0] = count_below (n->leaf.offset, n->h.n, x);
}

/* Position p at the first extent ending after x, or also ending at x
 * when touch is set (such an extent is adjacent to a range starting at
 * x).  The leaf index may equal n: then that extent is the first of the
 * next leaf, and p is where a new extent starting after x goes.
 */
void
extmap_seek (const struct extmap *map, uint64_t x, bool touch, struct path *p)
{
  const struct leaf *lf;
  unsigned j;

  descend (map, x + 1, p);
  lf = &p->node[0]->leaf;
  j = p->idx[0];
  if (j > 0) {
    uint64_t end = lf->offset[j - 1] + lf->length[j - 1];

    if (end > x || (touch && end == x))
      p->idx[0] = j - 1;
  }
}

/* Move p to the first extent of the next leaf. */
bool
extmap_next_leaf (unsigned height, struct path *p)
{
  for (unsigned l = 1; l < height; l++) {
    if (p->idx[l] + 1 < p->node[l]->h.n) {
      p->idx[l]++;
      while (l > 0) {
        union node *child = p->node[l]->inner.child[p->idx[l]];

        l--;
        p->node[l] = child;
        p->idx[l] = 0;
      }
      return true;
    }
  }
  return false;
}

/* The offset of the extent at index j of p's leaf, or when j is past
 * the leaf's end, of the first extent after that leaf, read from the
 * nearest ancestor's next key without moving p.
 */
static bool
start_at (const struct extmap *map, const struct path *p, unsigned j,
          uint64_t *start)
{
  if (j < p->node[0]->h.n) {
    *start = p->node[0]->leaf.offset[j];
    return true;
  }
  for (unsigned l = 1; l < map->height; l++) {
    if (p->idx[l] + 1 < p->node[l]->h.n) {
      *start = p->node[l]->inner.key[p->idx[l] + 1];
      return true;
    }
  }
  return false;
}
/* ---- restructuring ---- */

static void node_insert (struct extmap *map, struct path *p, unsigned l,
                         unsigned j, const struct elem *e);
static void underflow (struct extmap *map, struct path *p, unsigned l);

/* node[l] changed: bring the summaries above it up to date, stopping
 * as soon as one is unchanged (nothing above can change then).
 */
static void
refresh (struct extmap *map, struct path *p, unsigned l)
{
  for (; l + 1 < map->height; l++) {
    struct elem s = extmap_summary (map, layout_at (l), p->node[l]);
    struct inner *parent = &p->node[l + 1]->inner;
    unsigned i = p->idx[l + 1];

    if (same_summary (parent, i, &s))
      return;
    extmap_set_summary (parent, i, &s);
  }
}

/* The root is full: put a new root with it as its only child
 * above it, so the caller can split it like any other node.
 */
static void
grow_root (struct extmap *map, struct path *p)
{
  unsigned h = map->height;
  union node *r = extmap_node_alloc (&map->pool);
  struct elem e = entry_of (map, layout_at (h - 1), map->root);

  elem_store (&extmap_inner_layout, r, 0, &e);
  r->h.n = 1;
  p->node[h] = r;
  p->idx[h] = 0;
  map->root = r;
  map->height = h + 1;
}

/* Drop levels whose root has a single child, and the root when it is
 * empty.
 */
static void
shrink_root (struct extmap *map)
{
  while (map->height > 1 && map->root->h.n == 1) {
    union node *r = map->root;

    map->root = r->inner.child[0];
    map->height--;
    extmap_node_free (&map->pool, r);
  }
  if (map->root->h.n == 0) {
    extmap_node_free (&map->pool, map->root);
    map->root = NULL;
    map->height = 0;
  }
}

static void
gather (const struct layout *lay, struct gather *g, const union node *n,
        unsigned from, unsigned cnt)
{
  for (unsigned c = 0; c < lay->ncols; c++) {
    unsigned sz = lay->size[c];

    memcpy (g->col[c] + g->n * sz, col (lay, n, c) + from * sz,
            (size_t) cnt * sz);
  }
  g->n += cnt;
}

static void
gather_elem (const struct layout *lay, struct gather *g, const struct elem *e)
{
  /* (c < MAX_COLS is always true; it tells GCC -Os the bound.) */
  for (unsigned c = 0; c < lay->ncols && c < MAX_COLS; c++)
    val_store (g->col[c], lay->size[c], g->n, e->v[c]);
  g->n++;
}

static void
scatter (const struct layout *lay, const struct gather *g, unsigned from,
         union node *n, unsigned cnt)
{
  for (unsigned c = 0; c < lay->ncols; c++) {
    unsigned sz = lay->size[c];

    memcpy (col (lay, n, c), g->col[c] + from * sz, (size_t) cnt * sz);
  }
  n->h.n = cnt;
}

/* Deal the elements of children lo..lo+w-1 of parent, plus pend if
 * given, evenly over nodes[0..nout), and record the new summaries of
 * the first MIN (w, nout) in the parent.  Kept out of line so the
 * gather buffer is not on the stack while the caller recurses upwards.
 */
static void __attribute__ ((noinline))
spread (const struct extmap *map, const struct layout *lay,
        union node *parent, unsigned lo,
        unsigned w, union node **nodes, unsigned nout,
        const struct pending *pend)
{
  struct gather g;
  unsigned from = 0;

  g.n = 0;
  for (unsigned i = 0; i < w; i++) {
    if (pend && lo + i == pend->ci) {
      gather (lay, &g, nodes[i], 0, pend->j);
      gather_elem (lay, &g, pend->e);
      gather (lay, &g, nodes[i], pend->j, nodes[i]->h.n - pend->j);
    }
    else
      gather (lay, &g, nodes[i], 0, nodes[i]->h.n);
  }

  for (unsigned i = 0; i < nout; i++) {
    unsigned cnt = g.n / nout + (i < g.n % nout);

    scatter (lay, &g, from, nodes[i], cnt);
    from += cnt;
    if (i < w) {
      struct elem s = extmap_summary (map, lay, nodes[i]);

      extmap_set_summary (&parent->inner, lo + i, &s);
    }
  }
}

/* Rebalance children lo..hi of node[l+1] into nout nodes: one fewer
 * (a merge: the last node is freed), as many, or one more (a split:
 * a new node goes after hi), then fix the parent.
 */
static void
rebalance (struct extmap *map, struct path *p, unsigned l, unsigned lo,
           unsigned hi, unsigned nout, const struct pending *pend)
{
  const struct layout *lay = layout_at (l);
  union node *parent = p->node[l + 1];
  unsigned w = hi - lo + 1;
  union node *nodes[4];

  for (unsigned i = 0; i < w; i++)
    nodes[i] = parent->inner.child[lo + i];
  if (nout > w)
    nodes[w] = extmap_node_alloc (&map->pool);

  spread (map, lay, parent, lo, w, nodes, nout, pend);

  if (nout < w) {
    extmap_node_free (&map->pool, nodes[w - 1]);
    node_cut (&extmap_inner_layout, parent, hi, 1);
    underflow (map, p, l + 1);
  }
  else if (nout > w) {
    struct elem e = entry_of (map, lay, nodes[w]);

    node_insert (map, p, l + 1, hi + 1, &e);
  }
  else
    refresh (map, p, l + 1);
}

/* The siblings around child ci of parent considered for rebalancing:
 * the child and its neighbours on each side, if any.
 */
static unsigned
window (const union node *parent, unsigned ci, unsigned *lo, unsigned *hi,
        unsigned *total)
{
  *lo = ci > 0 ? ci - 1 : ci;
  *hi = ci + 1 < parent->h.n ? ci + 1 : ci;
  *total = 0;
  for (unsigned i = *lo; i <= *hi; i++)
    *total += parent->inner.child[i]->h.n;
  return *hi - *lo + 1;
}

/* Start a node of its own for e, as child pos of node[l+1]. */
static void
spill (struct extmap *map, struct path *p, unsigned l, unsigned pos,
       const struct elem *e)
{
  const struct layout *lay = layout_at (l);
  union node *n = extmap_node_alloc (&map->pool);
  struct elem entry;

  elem_store (lay, n, 0, e);
  n->h.n = 1;
  entry = entry_of (map, lay, n);
  refresh (map, p, l);          /* the caller may have changed node[l] */
  node_insert (map, p, l + 1, pos, &entry);
}

/* Insert e at j in full node[l]. */
static void
overflow (struct extmap *map, struct path *p, unsigned l, unsigned j,
          const struct elem *e)
{
  const struct layout *lay = layout_at (l);
  unsigned ci, lo, hi, total, w;
  union node *parent;

  if (l + 1 == map->height)
    grow_root (map, p);
  parent = p->node[l + 1];
  ci = p->idx[l + 1];

  /* Appending after the last element of the last child, or before the
   * first of the first: the pattern of ascending (descending) inserts.
   * A new node for just this element leaves the full one full, where a
   * split in the middle would leave two half-empty nodes behind.
   */
  if (j == p->node[l]->h.n && ci + 1 == parent->h.n) {
    spill (map, p, l, ci + 1, e);
    return;
  }
  if (j == 0 && ci == 0) {
    spill (map, p, l, 0, e);
    return;
  }

  /* Otherwise share with the neighbours, and split (3 nodes into 4, or
   * 1 into 2) only when they are full too.
   */
  w = window (parent, ci, &lo, &hi, &total);
  total++;
  rebalance (map, p, l, lo, hi, total <= w * lay->cap ? w : w + 1,
             &(struct pending) { .ci = ci, .j = j, .e = e });
}

/* Insert e at index j of node[l]; afterwards p is stale below l+1. */
static void
node_insert (struct extmap *map, struct path *p, unsigned l, unsigned j,
             const struct elem *e)
{
  const struct layout *lay = layout_at (l);
  union node *n = p->node[l];

  if (n->h.n == lay->cap) {
    overflow (map, p, l, j, e);
    return;
  }
  cols_move (lay, n, j + 1, n, j, n->h.n - j);
  elem_store (lay, n, j, e);
  n->h.n++;
  refresh (map, p, l);
}

/* node[l] lost elements: if it is now too empty, refill it from its
 * neighbours or merge it with them.
 */
static void
underflow (struct extmap *map, struct path *p, unsigned l)
{
  const struct layout *lay = layout_at (l);
  unsigned lo, hi, total, w;

  if (l + 1 == map->height) {
    shrink_root (map);
    return;
  }
  if (p->node[l]->h.n >= lay->min) {
    refresh (map, p, l);
    return;
  }
  w = window (p->node[l + 1], p->idx[l + 1], &lo, &hi, &total);
  if (w == 1) {
    /* An only child: its parent was started by spill.  Leave a node
     * with elements as it is, but drop an empty one, and its parent
     * too if that leaves the parent empty.
     */
    if (p->node[l]->h.n > 0) {
      refresh (map, p, l);
      return;
    }
    extmap_node_free (&map->pool, p->node[l]);
    node_cut (&extmap_inner_layout, p->node[l + 1], p->idx[l + 1], 1);
    underflow (map, p, l + 1);
    return;
  }
  rebalance (map, p, l, lo, hi, total <= (w - 1) * lay->cap ? w - 1 : w,
             NULL);
}

/* ---- granule totals and run values ---- */

/* Which granule total extent [s, s+len) counts in, and how much: its
 * aligned part, or, holding no whole granule, all of it.  NULL when the
 * map keeps no totals.  Every place that creates, changes or deletes a
 * leaf element adds the new extent and takes the old one away.
 */
static inline uint64_t *
granule_total (struct extmap *map, uint64_t s, uint64_t len,
               uint64_t *amount)
{
  uint64_t g = map->granularity, a, b;

  if (g == 0)
    return NULL;
  aligned_part (s, len, g, &a, &b);
  *amount = b > a ? b - a : len;
  return b > a ? &map->aligned : &map->subgranule;
}

static inline void
account_add (struct extmap *map, uint64_t s, uint64_t len)
{
  uint64_t amount, *total = granule_total (map, s, len, &amount);

  if (total)
    *total += amount;
}

static inline void
account_remove (struct extmap *map, uint64_t s, uint64_t len)
{
  uint64_t amount, *total = granule_total (map, s, len, &amount);

  if (total)
    *total -= amount;
}

/* The value of the part of extent j of leaf n that starts at x: a run's
 * value moves along with its offset, a time stays.
 */
static inline uint32_t
value_from (const struct extmap *map, const union node *n, unsigned j,
            uint64_t x)
{
  uint32_t v = n->leaf.time[j];

  return map->runs ? v + (uint32_t) (x - n->leaf.offset[j]) : v;
}

/* ---- operations on ranges ---- */

struct run {
  uint64_t bytes;               /* bytes of the extents deleted */
  uint64_t maxend;              /* furthest end among them */
  uint32_t maxtime;             /* newest time among them */
};

/* Add extents j..k-1 of leaf n, about to be deleted, to *run. */
static void
run_add (struct extmap *map, struct run *run, const union node *n, unsigned j,
         unsigned k)
{
  for (; j < k; j++) {
    account_remove (map, n->leaf.offset[j], n->leaf.length[j]);
    run->bytes += n->leaf.length[j];
    run->maxend = MAX (run->maxend, n->leaf.offset[j] + n->leaf.length[j]);
    run->maxtime = MAX (run->maxtime, n->leaf.time[j]);
  }
}

/* Delete every extent starting in [lo, hi], a leaf's worth at a time,
 * and describe them in *run (the caller accounts for their bytes).
 */
static void
delete_run (struct extmap *map, uint64_t lo, uint64_t hi, struct run *run)
{
  struct path p;

  while (map->root != NULL) {
    union node *n;
    unsigned j, k;
    bool more;

    descend (map, lo, &p);
    if (!settle (map, &p))
      return;
    n = p.node[0];
    j = p.idx[0];
    for (k = j; k < n->h.n && n->leaf.offset[k] <= hi; k++)
      ;
    if (k == j)
      return;
    run_add (map, run, n, j, k);
    more = k == n->h.n;         /* the run may go on in the next leaf */
    map->count -= k - j;
    node_cut (&extmap_leaf_layout, n, j, k - j);
    underflow (map, &p, 0);
    if (!more)
      return;
  }
}

static int
check_range (uint64_t offset, uint64_t length, uint64_t *end)
{
  if (length == 0 || ADD_OVERFLOW (offset, length, end) ||
      *end > EXTMAP_MAX_END) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* Nodes an insert or a split may need: one per level and a new root.
 * Only those two allocate, so only they can fail with ENOMEM: merging
 * and removing without a split always succeed.
 */
static int
reserve (struct extmap *map)
{
  if (map->height + 2 > MAX_HEIGHT) {
    errno = ENOMEM;
    return -1;
  }
  return extmap_pool_reserve (&map->pool, map->height + 2);
}

/* Store [s, e) at time t in the extent at p and refresh its ancestors. */
static void
set_extent (struct extmap *map, struct path *p, uint64_t s, uint64_t e,
            uint32_t t)
{
  union node *n = p->node[0];
  unsigned j = p->idx[0];

  account_remove (map, n->leaf.offset[j], n->leaf.length[j]);
  account_add (map, s, e - s);
  map->bytes += (e - s) - n->leaf.length[j];
  n->leaf.offset[j] = s;
  n->leaf.length[j] = e - s;
  n->leaf.time[j] = t;
  refresh (map, p, 0);
}

/* [s, e) touches the extent at p, and maybe more after it: fold them
 * all into that one, which keeps the newest time.
 */
static void
merge (struct extmap *map, struct path *p, uint64_t s, uint64_t e,
       uint32_t t)
{
  struct run run = { 0 };       /* the extents folded into the first */
  bool cut_here = false;
  uint64_t a0, next, after;
  union node *n;
  unsigned j;

  settle (map, p);
  n = p->node[0];
  j = p->idx[0];
  a0 = n->leaf.offset[j];
  if (start_at (map, p, j + 1, &next) && next <= e) {
    /* Filling the hole between two extents of one leaf is the common
     * case: take the second out here, without searching again.
     */
    cut_here = j + 1 < n->h.n &&
      (!start_at (map, p, j + 2, &after) || after > e);
    if (cut_here) {
      run_add (map, &run, n, j + 1, j + 2);
      map->count--;
      node_cut (&extmap_leaf_layout, n, j + 1, 1);
    }
    else {
      delete_run (map, a0 + 1, e, &run);
      descend (map, a0 + 1, p); /* find the first extent again */
      p->idx[0]--;
      n = p->node[0];
      j = p->idx[0];
    }
    map->bytes -= run.bytes;
  }
  e = MAX (MAX (e, run.maxend), n->leaf.offset[j] + n->leaf.length[j]);
  t = MAX (MAX (t, run.maxtime), n->leaf.time[j]);
  set_extent (map, p, MIN (s, a0), e, t);
  if (cut_here)
    underflow (map, p, 0);
}

/* Remove [s, e) from the map, adding the bytes removed to *gone. */
static int
cut (struct extmap *map, uint64_t s, uint64_t e, uint64_t *gone)
{
  struct path p;
  struct run run = { 0 };
  uint64_t a0, a_end, next;
  union node *n;
  unsigned j;

  extmap_seek (map, s, false, &p);
  if (!settle (map, &p))
    return 0;
  n = p.node[0];
  j = p.idx[0];
  a0 = n->leaf.offset[j];
  a_end = a0 + n->leaf.length[j];
  if (a0 >= e)
    return 0;

  if (a0 < s && a_end > e) {
    /* Inside one extent: keep its head here, its tail after it. */
    struct elem tail = { { e, a_end - e, value_from (map, n, j, e), 0 } };

    if (reserve (map) == -1)
      return -1;
    account_remove (map, a0, a_end - a0);
    account_add (map, a0, s - a0);
    account_add (map, e, a_end - e);
    n->leaf.length[j] = s - a0;
    map->bytes -= e - s;
    map->count++;
    node_insert (map, &p, 0, j + 1, &tail);
    *gone = e - s;
    return 0;
  }

  /* The common case, a range meeting one extent, without searching the
   * tree again.
   */
  if (!start_at (map, &p, j + 1, &next) || next >= e) {
    if (a0 < s)
      set_extent (map, &p, a0, s, n->leaf.time[j]);
    else if (a_end > e)
      set_extent (map, &p, e, a_end, value_from (map, n, j, e));
    else {
      account_remove (map, a0, a_end - a0);
      map->count--;
      map->bytes -= a_end - a0;
      node_cut (&extmap_leaf_layout, n, j, 1);
      underflow (map, &p, 0);
    }
    *gone = MIN (a_end, e) - MAX (a0, s);
    return 0;
  }

  if (a0 < s) {                 /* keep the head of the first extent */
    *gone += a_end - s;
    set_extent (map, &p, a0, s, n->leaf.time[j]);
  }
  extmap_seek (map, e, false, &p);     /* and the tail of the last */
  if (settle (map, &p)) {
    n = p.node[0];
    j = p.idx[0];
    a0 = n->leaf.offset[j];
    if (a0 < e) {
      *gone += e - a0;
      set_extent (map, &p, e, a0 + n->leaf.length[j],
                  value_from (map, n, j, e));
    }
  }
  delete_run (map, s, e - 1, &run);   /* what is left lies inside */
  map->bytes -= run.bytes;
  *gone += run.bytes;
  return 0;
}

/* ---- public functions ---- */

struct extmap *
extmap_new (void)
{
  return calloc (1, sizeof (struct extmap));
}

struct extmap *
extmap_new_runs (void)
{
  struct extmap *map = extmap_new ();

  if (map)
    map->runs = true;
  return map;
}

void
extmap_free (struct extmap *map)
{
  if (map == NULL)
    return;
  extmap_pool_release (&map->pool);
  free (map);
}

void
extmap_clear (struct extmap *map)
{
  extmap_pool_release (&map->pool);
  map->root = NULL;
  map->height = 0;
  map->count = 0;
  map->bytes = 0;
  map->aligned = 0;
  map->subgranule = 0;
  observe (map, EXTMAP_OBSERVE_CLEAR, 0, 0);
}

void
extmap_set_observer (struct extmap *map, extmap_observer_fn fn, void *opaque)
{
  map->observer = fn;
  map->observer_opaque = opaque;
}

/* A new extent at index j of p's leaf (or in a new root leaf). */
static int
insert_new (struct extmap *map, struct path *p, uint64_t offset,
            uint64_t length, uint32_t value)
{
  struct elem e = { { offset, length, value, 0 } };

  if (reserve (map) == -1)
    return -1;
  if (map->root == NULL) {
    map->root = extmap_node_alloc (&map->pool);
    map->height = 1;
    p->node[0] = map->root;
    p->idx[0] = 0;
  }
  account_add (map, offset, length);
  map->count++;
  map->bytes += length;
  node_insert (map, p, 0, p->idx[0], &e);
  return 0;
}

/* A run [offset, end) at value, into a map of runs: refused where it
 * overlaps, else joined to the run ending at offset and to the one
 * starting at end where values continue across.
 */
static int
insert_run (struct extmap *map, uint64_t offset, uint64_t end, uint32_t value)
{
  uint64_t length = end - offset, start, next, right_end = 0;
  struct path p, q;
  union node *n;
  unsigned j;
  bool touches_left, join_left = false, join_right = false;

  if (value + length > (UINT64_C (1) << 32)) {
    errno = EINVAL;
    return -1;
  }
  if (map->root == NULL)
    return insert_new (map, &p, offset, length, value);
  extmap_seek (map, offset, true, &p);
  if (!settle (map, &p))          /* every run ends before offset */
    return insert_new (map, &p, offset, length, value);
  n = p.node[0];
  j = p.idx[0];
  start = n->leaf.offset[j];
  touches_left = start + n->leaf.length[j] == offset;
  if (touches_left) {
    join_left = n->leaf.time[j] + n->leaf.length[j] == value;
    if (!start_at (map, &p, j + 1, &next))
      next = UINT64_MAX;
  }
  else
    next = start;
  if (next < end) {
    errno = EINVAL;               /* it overlaps a run */
    return -1;
  }
  if (next == end) {              /* the run starting at end */
    extmap_seek (map, end, false, &q);
    settle (map, &q);
    join_right = value + length == q.node[0]->leaf.time[q.idx[0]];
    right_end = end + q.node[0]->leaf.length[q.idx[0]];
  }
  if (join_left && join_right) {
    struct run run = { 0 };

    set_extent (map, &p, start, right_end, n->leaf.time[j]);
    delete_run (map, end, end, &run);
    map->bytes -= run.bytes;
  }
  else if (join_left)
    set_extent (map, &p, start, end, n->leaf.time[j]);
  else if (join_right)
    set_extent (map, &q, offset, right_end, value);
  else {
    if (touches_left)
      p.idx[0] = j + 1;           /* after the left neighbour */
    return insert_new (map, &p, offset, length, value);
  }
  return 0;
}

/* What every successful insert of [offset, end) leaves: the bytes
 * grew by at most its length (all of it in a map of runs, which refuses
 * overlaps), one extent covers it and, in small maps, the whole tree
 * checks out.
 */
static void
verify_inserted (const struct extmap *map, uint64_t offset, uint64_t end,
                 uint64_t bytes_before)
{
  VERIFY3U (map->bytes, >=, bytes_before);
  VERIFY3U (map->bytes - bytes_before, <=, end - offset);
  if (map->runs)
    VERIFY3U (map->bytes - bytes_before, ==, end - offset);
  DEBUG_VERIFY (extmap_check_covered (map, offset, end));
  DEBUG_VERIFY (map->count > EXTMAP_SELF_CHECK_MAX ||
                extmap_check (map) == NULL);
}

/* And a remove: bytes went down by exactly what it reports removed, no
 * more than asked, at most one extent appeared (a split) and nothing of
 * the range is left.
 */
static void
verify_removed (const struct extmap *map, uint64_t offset, uint64_t length,
                uint64_t gone, uint64_t bytes_before, size_t count_before)
{
  VERIFY3U (gone, <=, length);
  VERIFY3U (map->bytes + gone, ==, bytes_before);
  VERIFY3U (map->count, <=, count_before + 1);
  DEBUG_VERIFY (!extmap_find_overlap (map, offset, length,
                                      &(struct extent) { 0 }));
  DEBUG_VERIFY (map->count > EXTMAP_SELF_CHECK_MAX ||
                extmap_check (map) == NULL);
}

static int
insert (struct extmap *map, uint64_t offset, uint64_t length, uint32_t time,
        uint64_t end)
{
  struct elem e = { { offset, length, time, 0 } };
  struct path p;
  uint64_t next;
  int r;

  if (map->runs) {
    r = insert_run (map, offset, end, time);
    extmap_pool_trim (&map->pool);
    return r;
  }

  if (map->root != NULL) {
    extmap_seek (map, offset, true, &p);
    if (start_at (map, &p, p.idx[0], &next) && next <= end) {
      merge (map, &p, offset, end, time);
      extmap_pool_trim (&map->pool);
      observe (map, EXTMAP_OBSERVE_INSERT, offset, length);
      return 0;
    }
  }

  /* A new extent, at p (or in a new root leaf). */
  if (reserve (map) == -1)
    return -1;
  if (map->root == NULL) {
    map->root = extmap_node_alloc (&map->pool);
    map->height = 1;
    p.node[0] = map->root;
    p.idx[0] = 0;
  }
  account_add (map, offset, length);
  map->count++;
  map->bytes += length;
  node_insert (map, &p, 0, p.idx[0], &e);
  extmap_pool_trim (&map->pool);
  observe (map, EXTMAP_OBSERVE_INSERT, offset, length);
  return 0;
}

int
extmap_insert (struct extmap *map, uint64_t offset, uint64_t length,
               uint32_t time)
{
  uint64_t end, bytes_before = map->bytes;

  if (check_range (offset, length, &end) == -1 ||
      insert (map, offset, length, time, end) == -1)
    return -1;
  verify_inserted (map, offset, end, bytes_before);
  return 0;
}

int
extmap_remove (struct extmap *map, uint64_t offset, uint64_t length,
               uint64_t *removed)
{
  uint64_t end, gone = 0, bytes_before = map->bytes;
  size_t count_before = map->count;

  if (check_range (offset, length, &end) == -1)
    return -1;
  if (map->root != NULL) {
    int r = cut (map, offset, end, &gone);

    extmap_pool_trim (&map->pool);
    if (r == -1)
      return -1;
  }
  verify_removed (map, offset, length, gone, bytes_before, count_before);
  if (gone > 0)
    observe (map, EXTMAP_OBSERVE_REMOVE, offset, length);
  if (removed)
    *removed = gone;
  return 0;
}

/* Every extent of the map, in order, into the granule accounts (a walk
 * of the leaves here rather than extmap_iterate, so that the core never
 * calls its queries).
 */
static void
account_all (struct extmap *map)
{
  struct path p;

  if (map->root == NULL)
    return;
  extmap_seek (map, 0, false, &p);
  if (!settle (map, &p))
    return;
  do {
    for (unsigned j = p.idx[0]; j < p.node[0]->h.n; j++) {
      struct extent e;

      leaf_extent (p.node[0], j, &e);
      account_add (map, e.offset, e.length);
    }
  } while (extmap_next_leaf (map->height, &p));
}

/* Recompute every inner node's columns below n (level l), for a new
 * granularity or minlen.  O(nodes).
 */
static void
resummarize (const struct extmap *map, union node *n, unsigned l)
{
  if (l == 0)
    return;
  for (unsigned i = 0; i < n->h.n; i++) {
    struct elem s;

    resummarize (map, n->inner.child[i], l - 1);
    s = extmap_summary (map, layout_at (l - 1), n->inner.child[i]);
    extmap_set_summary (&n->inner, i, &s);
  }
}

void
extmap_set_granularity (struct extmap *map, uint64_t g)
{
  /* The granule totals round with masks. */
  VERIFY (g == 0 || is_power_of_2 (g));
  map->granularity = g;
  map->aligned = map->subgranule = 0;
  if (g)
    account_all (map);
  if (map->root)
    resummarize (map, map->root, map->height - 1);
}

void
extmap_set_minlen (struct extmap *map, uint64_t minlen)
{
  map->minlen = minlen;
  if (map->root)
    resummarize (map, map->root, map->height - 1);
}


/* Saturating subtraction is monotonic, so the oldest time under each
 * child stays the oldest once every time is shifted the same way.  The
 * oldest forwardable time is taken from the child again instead: an
 * extent at UINT32_MAX (NO_TIME, "none" in that column) becomes
 * visible once shifted.
 */
static void
rebase (const struct extmap *map, union node *n, unsigned l, uint32_t delta)
{
  const struct layout *lay = layout_at (l);
  uint32_t *time = (uint32_t *) col (lay, n, COL_TIME);

  for (unsigned i = 0; i < n->h.n; i++) {
    time[i] = time[i] > delta ? time[i] - delta : 0;
    if (l > 0) {
      union node *child = n->inner.child[i];

      rebase (map, child, l - 1, delta);
      n->inner.fwdtime[i] =
        extmap_summary (map, layout_at (l - 1), child).v[COL_FWDTIME];
    }
  }
}

void
extmap_rebase_time (struct extmap *map, uint32_t delta)
{
  if (map->root != NULL)
    rebase (map, map->root, map->height - 1, delta);
}

