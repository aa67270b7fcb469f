/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the extent map (extmap.h) on a B+tree.
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
 * searches of extmap_largest_before and extmap_largest_aligned_before.
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
 * Memory.  Nodes come from a pool of slabs mapped with mmap (64 KiB,
 * and 2 MiB huge-page slabs once the map is big), so releasing one
 * returns it to the kernel at once, where malloc would keep freed memory
 * in its arenas and RSS would not fall.  New nodes come from the
 * lowest-numbered slab with room, which packs live nodes low and lets
 * high slabs drain; empty slabs are unmapped at the end of each
 * operation, keeping the lowest one spare so that a map hovering at a
 * slab boundary does not map and unmap on every call.
 *
 * Failure.  The only allocations are nodes, one per level at most when
 * an insert splits its way to the root, and each modifying operation
 * reserves them in the pool before it changes anything: ENOMEM leaves
 * the map as it was.
 */

#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "arith.h"
#include "extmap.h"

/* GCC 12.2 at -O2 miscompiles the path walk: its mod/ref analysis
 * decides that next_leaf (which rewrites path->node[0]) does not
 * clobber path->node[0], and extmap_iterate then visits the first leaf
 * forever.  A 60-line reproducer behaves the same; -fno-ipa-modref,
 * -O1, -O3 and clang are all fine.  Turn the pass off for this file.
 */
#if defined __GNUC__ && !defined __clang__
#pragma GCC optimize ("no-ipa-modref")
#endif

/* The test suite builds a second copy with tiny nodes, so that a few
 * hundred extents already make a deep tree and every split, merge and
 * slab release is reached.
 */
#ifdef EXTMAP_SMALL_NODES
#define LEAF_CAP 5
#define INNER_CAP 4
#define SMALL_SLAB_NODES 8
#define BIG_SLAB_NODES 64
#define SMALL_SLABS 4
#else
#define LEAF_CAP 25
#define INNER_CAP 15
#define SMALL_SLAB_NODES 128    /* 64 KiB */
#define BIG_SLAB_NODES 4096     /* 2 MiB, one transparent huge page */
#define SMALL_SLABS 32          /* then big slabs, past 2 MiB of nodes */
#endif

/* More levels than any map that fits in memory can have: even the
 * small-node build at half fill reaches 40 levels only past 2^40
 * extents.
 */
#define MAX_HEIGHT 40

/* Largest number of elements gathered when siblings are rebalanced:
 * three full nodes and the element being inserted.
 */
#define GATHER_MAX (3 * (LEAF_CAP > INNER_CAP ? LEAF_CAP : INNER_CAP) + 1)

struct node_hdr {
  uint32_t slab;                /* index of the slab holding this node */
  uint16_t n;                   /* elements in use */
  uint16_t next_free;           /* while free: next free slot in the slab */
};

struct leaf {
  struct node_hdr h;
  uint64_t offset[LEAF_CAP];
  uint64_t length[LEAF_CAP];
  uint32_t time[LEAF_CAP];
};

struct inner {
  struct node_hdr h;
  uint64_t key[INNER_CAP];      /* first offset under child i */
  uint64_t maxlen[INNER_CAP];   /* longest extent under child i */
  uint32_t mintime[INNER_CAP];  /* oldest time under child i */
  union node *child[INNER_CAP];
  uint32_t fwdtime[INNER_CAP];  /* oldest forwardable one, or NO_TIME */
};

union node {
  struct node_hdr h;
  struct leaf leaf;
  struct inner inner;
};

#ifndef EXTMAP_SMALL_NODES
_Static_assert (sizeof (union node) == 512, "a node is 512 bytes");
#endif

/* Columns shared by both kinds of node, in the same order, so that a
 * node's summary (first offset, longest, oldest) is computed the same
 * way for a leaf and for an inner node.  COL_FWDTIME is the inner
 * nodes' alone: a leaf's is computed from its offsets and lengths.
 */
enum { COL_START, COL_LEN, COL_TIME, COL_CHILD, COL_FWDTIME, MAX_COLS };

/* In the fwdtime column: no forwardable extent under this child. */
#define NO_TIME UINT32_MAX

struct layout {
  unsigned cap;                 /* elements per node */
  unsigned min;                 /* below this after a removal: rebalance */
  unsigned ncols;
  unsigned off[MAX_COLS];       /* byte offset of each column's array */
  unsigned size[MAX_COLS];      /* bytes per element of each column */
};

static const struct layout leaf_layout = {
  .cap = LEAF_CAP,
  .min = LEAF_CAP / 2,
  .ncols = 3,
  .off = { offsetof (struct leaf, offset), offsetof (struct leaf, length),
           offsetof (struct leaf, time) },
  .size = { 8, 8, 4 },
};

static const struct layout inner_layout = {
  .cap = INNER_CAP,
  .min = INNER_CAP / 2,
  .ncols = 5,
  .off = { offsetof (struct inner, key), offsetof (struct inner, maxlen),
           offsetof (struct inner, mintime), offsetof (struct inner, child),
           offsetof (struct inner, fwdtime) },
  .size = { 8, 8, 4, sizeof (union node *), 4 },
};

/* One element of either kind, every column widened to 64 bits. */
struct elem {
  uint64_t v[MAX_COLS];
};

/* Node pool: slabs, each with its own free list so that a slab whose
 * nodes are all free can be unmapped.  A small map gets 64 KiB slabs;
 * past SMALL_SLABS of them, new slabs are 2 MiB, aligned and marked for
 * transparent huge pages: a big map's leaves are spread over hundreds
 * of megabytes, and with 4 KiB pages nearly every leaf visited missed
 * the TLB too (a dependent load over 256 MiB took 270 ns here, 175 ns
 * on huge pages).
 */
#define HUGE_PAGE (UINT64_C (2) << 20)
#define NO_SLOT UINT16_MAX

struct slab {
  union node *nodes;            /* NULL: this table entry is unused */
  uint16_t nnodes;              /* SMALL_SLAB_NODES or BIG_SLAB_NODES */
  uint16_t used;                /* nodes handed out */
  uint16_t bump;                /* slots from here on were never used */
  uint16_t free_head;           /* first freed slot, or NO_SLOT */
};

struct pool {
  struct slab *slabs;
  uint64_t *avail;              /* bit i: slabs[i] is mapped and has room */
  size_t nslabs;                /* table entries in use, mapped or not */
  size_t cap;                   /* table entries allocated, multiple of 64 */
  size_t mapped;                /* slabs mapped */
  size_t bytes;                 /* bytes mapped */
  size_t free_nodes;            /* free slots in mapped slabs */
  size_t empty;                 /* mapped slabs with no node in use */
  size_t hint;                  /* no avail bit is set below this word */
};

struct extmap {
  union node *root;             /* NULL when the map is empty */
  unsigned height;              /* levels; 1 when the root is a leaf */
  size_t count;
  uint64_t bytes;
  bool runs;                    /* a map of runs (extmap_new_runs) */
  uint64_t granularity;         /* 0: the granule totals are not kept */
  uint64_t minlen;              /* forwardable: at least this long */
  uint64_t aligned;             /* sum of the aligned parts */
  uint64_t subgranule;          /* bytes of extents holding no granule */
  extmap_observer_fn observer;  /* NULL: nobody observes the changes */
  void *observer_opaque;
  struct pool pool;
};

static void
observe (const struct extmap *map, enum extmap_observe_op op,
         uint64_t offset, uint64_t length)
{
  if (map->observer)
    map->observer (map->observer_opaque, op, offset, length);
}

/* A root-to-leaf path.  Level 0 is the leaf and height-1 the root, so
 * growing the tree adds a level at the top without renumbering.  idx[l]
 * is the child taken in node[l], or at level 0 the extent's index.
 */
struct path {
  union node *node[MAX_HEIGHT];
  unsigned idx[MAX_HEIGHT];
};

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

static inline const struct layout *
layout_at (unsigned level)
{
  return level == 0 ? &leaf_layout : &inner_layout;
}

static inline unsigned char *
col (const struct layout *lay, const union node *n, unsigned c)
{
  return (unsigned char *) n + lay->off[c];
}

static inline uint64_t
val_load (const unsigned char *base, unsigned size, unsigned i)
{
  if (size == 8) {
    uint64_t v;
    memcpy (&v, base + (size_t) i * 8, 8);
    return v;
  }
  else {
    uint32_t v;
    memcpy (&v, base + (size_t) i * 4, 4);
    return v;
  }
}

static inline void
val_store (unsigned char *base, unsigned size, unsigned i, uint64_t v)
{
  if (size == 8)
    memcpy (base + (size_t) i * 8, &v, 8);
  else {
    uint32_t v32 = v;
    memcpy (base + (size_t) i * 4, &v32, 4);
  }
}

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

/* The granule-aligned part of [s, s+len) is [*a, *b), empty when
 * *b <= *a.  g is a power of two (extmap_set_granularity asserts it
 * once: these run for every element a summary or a total looks at, so
 * they use the mask, not round_up's assertion).  Ends are at most 2^63,
 * so rounding up cannot wrap.
 */
static inline void
aligned_part (uint64_t s, uint64_t len, uint64_t g, uint64_t *a, uint64_t *b)
{
  uint64_t mask = ~(g - 1);

  *a = (s + g - 1) & mask;
  *b = (s + len) & mask;
}

/* Whether [offset, offset+len) holds a whole granule of g (0: no
 * granularity, nothing does).
 */
static inline bool
holds_granule (uint64_t offset, uint64_t len, uint64_t g)
{
  uint64_t a, b;

  if (g == 0)
    return false;
  aligned_part (offset, len, g, &a, &b);
  return b > a;
}

static inline bool
forwardable (const struct extmap *map, uint64_t offset, uint64_t len)
{
  return len >= map->minlen && holds_granule (offset, len, map->granularity);
}

/* What the parent records about a node: first offset, longest extent,
 * oldest time, oldest time of a forwardable extent (COL_CHILD is left
 * for the caller).
 */
static struct elem
summary (const struct extmap *map, const struct layout *lay,
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
  if (lay == &inner_layout) {
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
static void
set_summary (struct inner *parent, unsigned i, const struct elem *s)
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
  struct elem e = summary (map, lay, n);

  e.v[COL_CHILD] = (uintptr_t) n;
  return e;
}

static void
leaf_extent (const union node *n, unsigned j, struct extent *out)
{
  out->offset = n->leaf.offset[j];
  out->length = n->leaf.length[j];
  out->time = n->leaf.time[j];
}

/* ---- node pool ---- */

/* The fuzz target (tests/fuzz/fuzz-extmap.c) builds this file with
 * EXTMAP_FAULT_INJECTION and sets the hook to fail chosen allocations,
 * so every ENOMEM path is checked to leave the map as it was.
 */
#ifdef EXTMAP_FAULT_INJECTION
bool (*extmap_fault_hook) (void);
#define INJECT_ENOMEM() (extmap_fault_hook != NULL && extmap_fault_hook ())
#else
#define INJECT_ENOMEM() false
#endif

static int
pool_grow_table (struct pool *pool)
{
  size_t cap = pool->cap ? pool->cap * 2 : 64;
  struct slab *slabs;
  uint64_t *avail;

  if (INJECT_ENOMEM ())
    return -1;
  slabs = realloc (pool->slabs, cap * sizeof *slabs);
  if (slabs == NULL)
    return -1;
  pool->slabs = slabs;
  avail = realloc (pool->avail, cap / 64 * sizeof *avail);
  if (avail == NULL)
    return -1;
  memset (avail + pool->cap / 64, 0, (cap - pool->cap) / 64 * sizeof *avail);
  pool->avail = avail;
  pool->cap = cap;
  return 0;
}

static inline void
avail_set (struct pool *pool, size_t i, bool on)
{
  if (on) {
    pool->avail[i / 64] |= UINT64_C (1) << (i % 64);
    pool->hint = MIN (pool->hint, i / 64);
  }
  else
    pool->avail[i / 64] &= ~(UINT64_C (1) << (i % 64));
}

static size_t
slab_bytes (unsigned nnodes)
{
  return round_up (nnodes * sizeof (union node), 4096);
}

/* Map a slab; a huge-page sized one at a huge-page boundary (mapping
 * more and trimming), with the hint to back it by a huge page.
 */
static void *
map_slab (size_t bytes)
{
  size_t align = bytes % HUGE_PAGE == 0 ? HUGE_PAGE : 0;
  char *p, *q;

  p = mmap (NULL, bytes + align, PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  if (align == 0)
    return p;
  q = (char *) round_up ((uintptr_t) p, align);
  if (q > p)
    munmap (p, q - p);
  if (q < p + align)
    munmap (q + bytes, p + align - q);
#ifdef MADV_HUGEPAGE
  madvise (q, bytes, MADV_HUGEPAGE);    /* only a hint: may fail */
#endif
  return q;
}

/* Map one more slab, reusing a table entry freed by pool_trim. */
static int
pool_add_slab (struct pool *pool)
{
  unsigned nnodes = pool->mapped < SMALL_SLABS ?
    SMALL_SLAB_NODES : BIG_SLAB_NODES;
  size_t i;
  void *mem;

  if (pool->mapped < pool->nslabs) {
    for (i = 0; pool->slabs[i].nodes != NULL; i++)
      ;
  }
  else {
    if (pool->nslabs == pool->cap && pool_grow_table (pool) == -1)
      return -1;
    i = pool->nslabs;
  }

  mem = INJECT_ENOMEM () ? NULL : map_slab (slab_bytes (nnodes));
  if (mem == NULL) {
    errno = ENOMEM;
    return -1;
  }
  pool->slabs[i] = (struct slab) {
    .nodes = mem, .nnodes = nnodes, .free_head = NO_SLOT
  };
  if (i == pool->nslabs)
    pool->nslabs++;
  pool->mapped++;
  pool->bytes += slab_bytes (nnodes);
  pool->empty++;
  pool->free_nodes += nnodes;
  avail_set (pool, i, true);
  return 0;
}

/* Make sure the next need node allocations cannot fail. */
static int
pool_reserve (struct pool *pool, size_t need)
{
  while (pool->free_nodes < need) {
    if (pool_add_slab (pool) == -1) {
      errno = ENOMEM;
      return -1;
    }
  }
  return 0;
}

/* Take a node from the lowest slab with room.  Never fails: callers
 * have reserved.
 */
static union node *
node_alloc (struct pool *pool)
{
  size_t w = pool->hint, i;
  struct slab *s;
  union node *n;
  unsigned slot;

  while (pool->avail[w] == 0)
    w++;
  pool->hint = w;
  i = w * 64 + __builtin_ctzll (pool->avail[w]);
  s = &pool->slabs[i];

  if (s->free_head != NO_SLOT) {
    slot = s->free_head;
    s->free_head = s->nodes[slot].h.next_free;
  }
  else
    slot = s->bump++;
  if (s->used++ == 0)
    pool->empty--;
  if (s->used == s->nnodes)
    avail_set (pool, i, false);
  pool->free_nodes--;

  n = &s->nodes[slot];
  n->h = (struct node_hdr) { .slab = i };
  return n;
}

static void
node_free (struct pool *pool, union node *n)
{
  size_t i = n->h.slab;
  struct slab *s = &pool->slabs[i];

  n->h.next_free = s->free_head;
  s->free_head = n - s->nodes;
  if (s->used-- == s->nnodes)
    avail_set (pool, i, true);
  if (s->used == 0)
    pool->empty++;
  pool->free_nodes++;
}

static void
pool_unmap (struct pool *pool, size_t i)
{
  struct slab *s = &pool->slabs[i];

  munmap (s->nodes, slab_bytes (s->nnodes));
  s->nodes = NULL;
  avail_set (pool, i, false);
  pool->mapped--;
  pool->bytes -= slab_bytes (s->nnodes);
  pool->empty--;
  pool->free_nodes -= s->nnodes;
}

/* Give empty slabs back to the kernel, all but the lowest one. */
static void
pool_trim (struct pool *pool)
{
  if (pool->empty <= 1)
    return;

  for (size_t i = pool->nslabs; i-- > 0 && pool->empty > 1;) {
    if (pool->slabs[i].nodes != NULL && pool->slabs[i].used == 0)
      pool_unmap (pool, i);
  }
  while (pool->nslabs > 0 && pool->slabs[pool->nslabs - 1].nodes == NULL)
    pool->nslabs--;

  /* Shrink the table too when most of it is unused (halving only at a
   * quarter full, so that a map going up and down does not realloc
   * every time).  If realloc fails the bigger table simply stays.
   */
  if (pool->cap > 64 && pool->nslabs <= pool->cap / 4) {
    size_t cap = pool->cap / 2;
    struct slab *slabs;
    uint64_t *avail;

    while (cap > 64 && pool->nslabs <= cap / 4)
      cap /= 2;
    slabs = realloc (pool->slabs, cap * sizeof *slabs);

    if (slabs == NULL)
      return;
    pool->slabs = slabs;
    avail = realloc (pool->avail, cap / 64 * sizeof *avail);
    if (avail != NULL)
      pool->avail = avail;
    pool->cap = cap;
    pool->hint = MIN (pool->hint, cap / 64 - 1);
  }
}

static void
pool_release (struct pool *pool)
{
  for (size_t i = 0; i < pool->nslabs; i++) {
    if (pool->slabs[i].nodes != NULL)
      munmap (pool->slabs[i].nodes, slab_bytes (pool->slabs[i].nnodes));
  }
  free (pool->slabs);
  free (pool->avail);
  *pool = (struct pool) { 0 };
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
static void
seek (const struct extmap *map, uint64_t x, bool touch, struct path *p)
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
static bool
next_leaf (unsigned height, struct path *p)
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

/* If p is past the end of its leaf, move it to the next extent. */
static bool
settle (const struct extmap *map, struct path *p)
{
  return p->idx[0] < p->node[0]->h.n || next_leaf (map->height, p);
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
    struct elem s = summary (map, layout_at (l), p->node[l]);
    struct inner *parent = &p->node[l + 1]->inner;
    unsigned i = p->idx[l + 1];

    if (same_summary (parent, i, &s))
      return;
    set_summary (parent, i, &s);
  }
}

/* The root is full: put a new root with it as its only child
 * above it, so the caller can split it like any other node.
 */
static void
grow_root (struct extmap *map, struct path *p)
{
  unsigned h = map->height;
  union node *r = node_alloc (&map->pool);
  struct elem e = entry_of (map, layout_at (h - 1), map->root);

  elem_store (&inner_layout, r, 0, &e);
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
    node_free (&map->pool, r);
  }
  if (map->root->h.n == 0) {
    node_free (&map->pool, map->root);
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
      struct elem s = summary (map, lay, nodes[i]);

      set_summary (&parent->inner, lo + i, &s);
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
    nodes[w] = node_alloc (&map->pool);

  spread (map, lay, parent, lo, w, nodes, nout, pend);

  if (nout < w) {
    node_free (&map->pool, nodes[w - 1]);
    node_cut (&inner_layout, parent, hi, 1);
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
  union node *n = node_alloc (&map->pool);
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
    node_free (&map->pool, p->node[l]);
    node_cut (&inner_layout, p->node[l + 1], p->idx[l + 1], 1);
    underflow (map, p, l + 1);
    return;
  }
  rebalance (map, p, l, lo, hi, total <= (w - 1) * lay->cap ? w - 1 : w,
             NULL);
}

/* ---- granule totals and run values ---- */

/* Add extent [s, s+len) to the granule totals (add) or take it away.
 * Every place that creates, changes or deletes a leaf element calls
 * this, for the old extent and the new one.
 */
static inline void
account (struct extmap *map, uint64_t s, uint64_t len, bool add)
{
  uint64_t g = map->granularity, a, b, *total, amount;

  if (g == 0)
    return;
  aligned_part (s, len, g, &a, &b);
  if (b > a) {
    total = &map->aligned;
    amount = b - a;
  }
  else {
    total = &map->subgranule;
    amount = len;
  }
  if (add)
    *total += amount;
  else
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
    account (map, n->leaf.offset[j], n->leaf.length[j], false);
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
    node_cut (&leaf_layout, n, j, k - j);
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
  return pool_reserve (&map->pool, map->height + 2);
}

/* Store [s, e) at time t in the extent at p and refresh its ancestors. */
static void
set_extent (struct extmap *map, struct path *p, uint64_t s, uint64_t e,
            uint32_t t)
{
  union node *n = p->node[0];
  unsigned j = p->idx[0];

  account (map, n->leaf.offset[j], n->leaf.length[j], false);
  account (map, s, e - s, true);
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
      node_cut (&leaf_layout, n, j + 1, 1);
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

  seek (map, s, false, &p);
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
    account (map, a0, a_end - a0, false);
    account (map, a0, s - a0, true);
    account (map, e, a_end - e, true);
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
      account (map, a0, a_end - a0, false);
      map->count--;
      map->bytes -= a_end - a0;
      node_cut (&leaf_layout, n, j, 1);
      underflow (map, &p, 0);
    }
    *gone = MIN (a_end, e) - MAX (a0, s);
    return 0;
  }

  if (a0 < s) {                 /* keep the head of the first extent */
    *gone += a_end - s;
    set_extent (map, &p, a0, s, n->leaf.time[j]);
  }
  seek (map, e, false, &p);     /* and the tail of the last */
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
  pool_release (&map->pool);
  free (map);
}

void
extmap_clear (struct extmap *map)
{
  pool_release (&map->pool);
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
    map->root = node_alloc (&map->pool);
    map->height = 1;
    p->node[0] = map->root;
    p->idx[0] = 0;
  }
  account (map, offset, length, true);
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
  seek (map, offset, true, &p);
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
    seek (map, end, false, &q);
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

int
extmap_insert (struct extmap *map, uint64_t offset, uint64_t length,
               uint32_t time)
{
  struct elem e = { { offset, length, time, 0 } };
  struct path p;
  uint64_t end, next;
  int r;

  if (check_range (offset, length, &end) == -1)
    return -1;
  if (map->runs) {
    r = insert_run (map, offset, end, time);
    pool_trim (&map->pool);
    return r;
  }

  if (map->root != NULL) {
    seek (map, offset, true, &p);
    if (start_at (map, &p, p.idx[0], &next) && next <= end) {
      merge (map, &p, offset, end, time);
      pool_trim (&map->pool);
      observe (map, EXTMAP_OBSERVE_INSERT, offset, length);
      return 0;
    }
  }

  /* A new extent, at p (or in a new root leaf). */
  if (reserve (map) == -1)
    return -1;
  if (map->root == NULL) {
    map->root = node_alloc (&map->pool);
    map->height = 1;
    p.node[0] = map->root;
    p.idx[0] = 0;
  }
  account (map, offset, length, true);
  map->count++;
  map->bytes += length;
  node_insert (map, &p, 0, p.idx[0], &e);
  pool_trim (&map->pool);
  observe (map, EXTMAP_OBSERVE_INSERT, offset, length);
  return 0;
}

int
extmap_remove (struct extmap *map, uint64_t offset, uint64_t length,
               uint64_t *removed)
{
  uint64_t end, gone = 0;

  if (check_range (offset, length, &end) == -1)
    return -1;
  if (map->root != NULL) {
    int r = cut (map, offset, end, &gone);

    pool_trim (&map->pool);
    if (r == -1)
      return -1;
  }
  if (gone > 0)
    observe (map, EXTMAP_OBSERVE_REMOVE, offset, length);
  if (removed)
    *removed = gone;
  return 0;
}

/* The first extent ending after offset, in *p. */
static bool
find_from (const struct extmap *map, uint64_t offset, struct path *p)
{
  if (map->root == NULL || offset >= EXTMAP_MAX_END)
    return false;               /* (and seek's offset + 1 cannot wrap) */
  seek (map, offset, false, p);
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
  } while (next_leaf (map->height, &p));
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
  target = summary (map, layout_at (map->height - 1), n).v[c];
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
  target = summary (map, layout_at (map->height - 1), n).v[COL_FWDTIME];
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

/* Branch and bound.  In each inner node the child with the longest
 * extent among those holding something old enough goes first, so that
 * a long candidate is found early and bounds the rest; the others follow
 * in address order.
 */
static void
best_before (const union node *n, unsigned l, struct best *b)
{
  unsigned first = n->h.n;
  uint64_t top = 0;

  if (l == 0) {
    for (unsigned j = 0; j < n->h.n; j++) {
      uint64_t len = n->leaf.length[j];

      if (n->leaf.time[j] <= b->cutoff &&
          (len > b->length ||
           (len == b->length && n->leaf.offset[j] < b->offset))) {
        b->length = len;
        b->offset = n->leaf.offset[j];
        b->leaf = n;
        b->j = j;
      }
    }
    return;
  }
  for (unsigned i = 0; i < n->h.n; i++) {
    if (n->inner.mintime[i] <= b->cutoff && n->inner.maxlen[i] > top) {
      top = n->inner.maxlen[i];
      first = i;
    }
  }
  if (first == n->h.n)
    return;
  if (promising (n, first, b))
    best_before (n->inner.child[first], l - 1, b);
  for (unsigned i = 0; i < n->h.n; i++) {
    if (i != first && promising (n, i, b))
      best_before (n->inner.child[i], l - 1, b);
  }
}

bool
extmap_largest_before (const struct extmap *map, uint32_t cutoff,
                       struct extent *out)
{
  struct best b = { .cutoff = cutoff };

  if (map->root == NULL)
    return false;
  best_before (map->root, map->height - 1, &b);
  if (b.length == 0)
    return false;
  leaf_extent (b.leaf, b.j, out);
  return true;
}

/* The search of extmap_largest_aligned_before: as best_before, with
 * the predicate narrowed to extents that hold a whole granule and are
 * at least minlen long, and children skipped by what their columns
 * rule out.
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

static int
account_visit (const struct extent *x, void *opaque)
{
  account (opaque, x->offset, x->length, true);
  return 0;
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
    s = summary (map, layout_at (l - 1), n->inner.child[i]);
    set_summary (&n->inner, i, &s);
  }
}

void
extmap_set_granularity (struct extmap *map, uint64_t g)
{
  assert (g == 0 || is_power_of_2 (g));
  map->granularity = g;
  map->aligned = map->subgranule = 0;
  if (g)
    extmap_iterate (map, 0, account_visit, map);
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
        summary (map, layout_at (l - 1), child).v[COL_FWDTIME];
    }
  }
}

void
extmap_rebase_time (struct extmap *map, uint32_t delta)
{
  if (map->root != NULL)
    rebase (map, map->root, map->height - 1, delta);
}

/* ---- self-check ---- */

/* Not in extmap.h: a consistency check for the test suite, which
 * declares it itself.  Returns NULL, or a description of the first
 * broken invariant.
 */
extern const char *extmap_check (const struct extmap *map);

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
    struct elem s = summary (map, layout_at (l - 1), child);

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
