/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the extent map's node pool (see extmap-internal.h).  It
 * knows of a node only its size and its header (the slab it is in, the
 * next free slot): nothing of trees or extents.
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
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "arith.h"
#include "extmap-internal.h"
#include "verify.h"

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

/* Map one more slab, reusing a table entry freed by extmap_pool_trim. */
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
int
extmap_pool_reserve (struct pool *pool, size_t need)
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
union node *
extmap_node_alloc (struct pool *pool)
{
  size_t w = pool->hint, i;
  struct slab *s;
  union node *n;
  unsigned slot;

  /* Without a reserve the scan below runs off the end of avail[]. */
  VERIFY3U (pool->free_nodes, >, 0);
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

void
extmap_node_free (struct pool *pool, union node *n)
{
  size_t i = n->h.slab;
  struct slab *s;

  VERIFY3U (i, <, pool->nslabs);
  s = &pool->slabs[i];
  /* A node freed twice would be handed out twice. */
  VERIFY3U (s->used, >, 0);
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
void
extmap_pool_trim (struct pool *pool)
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

void
extmap_pool_release (struct pool *pool)
{
  for (size_t i = 0; i < pool->nslabs; i++) {
    if (pool->slabs[i].nodes != NULL)
      munmap (pool->slabs[i].nodes, slab_bytes (pool->slabs[i].nnodes));
  }
  free (pool->slabs);
  free (pool->avail);
  *pool = (struct pool) { 0 };
}
