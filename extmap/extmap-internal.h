/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what the files of the extent map share (not for its
 * users: they have extmap.h): the node layout, the pool, the map and a
 * root-to-leaf path, the column accessors, and the few functions of the
 * tree core that the queries and the self-check call.  The design is at
 * the top of extmap.c.
 */
#ifndef DISCARDCACHE_EXTMAP_INTERNAL_H
#define DISCARDCACHE_EXTMAP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "extmap.h"

#include "extmap.h"

/* GCC 12.2 at -O2 miscompiles the path walk: its mod/ref analysis
 * decides that next_leaf (which rewrites path->node[0]) does not
 * clobber path->node[0], and extmap_iterate then visits the first leaf
 * forever.  A 60-line reproducer behaves the same; -fno-ipa-modref,
 * -O1, -O3 and clang are all fine.  Turn the pass off for every file
 * of the map (this header is included by each).
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
 * node's extmap_summary (first offset, longest, oldest) is computed the same
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

/* A root-to-leaf path.  Level 0 is the leaf and height-1 the root, so
 * growing the tree adds a level at the top without renumbering.  idx[l]
 * is the child taken in node[l], or at level 0 the extent's index.
 */
struct path {
  union node *node[MAX_HEIGHT];
  unsigned idx[MAX_HEIGHT];
};

/* ---- columns ---- */

/* The layouts of the two kinds of node (extmap.c). */
extern const struct layout extmap_leaf_layout, extmap_inner_layout;

static inline const struct layout *
layout_at (unsigned level)
{
  return level == 0 ? &extmap_leaf_layout : &extmap_inner_layout;
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

static inline void
leaf_extent (const union node *n, unsigned j, struct extent *out)
{
  out->offset = n->leaf.offset[j];
  out->length = n->leaf.length[j];
  out->time = n->leaf.time[j];
}

/* ---- extmap.c: the tree core ---- */

/* What the parent records about a node: first offset, longest extent,
 * oldest time, oldest time of a forwardable extent (COL_CHILD is left
 * for the caller).
 */
extern struct elem extmap_summary (const struct extmap *map,
                                   const struct layout *lay,
                                   const union node *n);

/* Record summary s as child i's in inner node parent. */
extern void extmap_set_summary (struct inner *parent, unsigned i,
                                const struct elem *s);

/* Position p at the first extent ending after x, or also ending at x
 * when touch is set.  The leaf index may equal n (see extmap.c).
 */
extern void extmap_seek (const struct extmap *map, uint64_t x, bool touch,
                         struct path *p);

/* Move p to the first extent of the next leaf. */
extern bool extmap_next_leaf (unsigned height, struct path *p);

/* If p is past the end of its leaf, move it to the next extent. */
static inline bool
settle (const struct extmap *map, struct path *p)
{
  return p->idx[0] < p->node[0]->h.n || extmap_next_leaf (map->height, p);
}

/* ---- extmap-pool.c: the node pool ---- */

/* Make sure the next need node allocations cannot fail.  0, or -1
 * (ENOMEM; nothing changed).
 */
extern int extmap_pool_reserve (struct pool *pool, size_t need);

/* A node from the pool (reserved first), and back. */
extern union node *extmap_node_alloc (struct pool *pool);
extern void extmap_node_free (struct pool *pool, union node *n);

/* Give empty slabs back to the kernel, all but the lowest one. */
extern void extmap_pool_trim (struct pool *pool);

/* Unmap every slab: the pool is empty and unused. */
extern void extmap_pool_release (struct pool *pool);

/* ---- extmap-check.c: the self-checks ---- */

/* The whole tree's invariants, walked from the root: NULL, or the first
 * that is broken.  O(n): the mutators run it in debug builds only on
 * maps of at most EXTMAP_SELF_CHECK_MAX extents (common/verify.h).
 */
extern const char *extmap_check (const struct extmap *map);
#define EXTMAP_SELF_CHECK_MAX 64

/* After [offset, end) went in: one extent covers it, and in a map of
 * extents neither neighbour overlaps or touches that one (they would
 * have merged).  O(height).
 */
extern bool extmap_check_covered (const struct extmap *map, uint64_t offset,
                                  uint64_t end);

#endif /* DISCARDCACHE_EXTMAP_INTERNAL_H */
