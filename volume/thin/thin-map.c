/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's map of runs (see thin-pure.h): logical slot runs
 * onto physical slot runs in the extent map's B+tree, and the checks
 * recovery makes with the free set instead of per-slot tables.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "log.h"
#include "thin-pure.h"

int
thin_map_init (struct thin_map *m, uint64_t nlogical, uint64_t nphys)
{
  *m = (struct thin_map) { .nlogical = nlogical, .nphys = nphys };
  m->runs = extmap_new_runs ();
  if (m->runs == NULL) {
    dc_error ("thin: out of memory for the map");
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

void
thin_map_free (struct thin_map *m)
{
  extmap_free (m->runs);
  m->runs = NULL;
}

bool
thin_map_lookup (const struct thin_map *m, uint64_t l, uint64_t max,
                 uint32_t *p, uint64_t *n)
{
  struct extent x;

  if (!extmap_find_from (m->runs, l, &x)) {
    *n = max;
    return false;
  }
  if (x.offset > l) {
    *n = MIN (max, x.offset - l);
    return false;
  }
  *p = x.value + (uint32_t) (l - x.offset);
  *n = MIN (max, x.offset + x.length - l);
  return true;
}

static bool
in_range (const struct thin_map *m, uint64_t l, uint64_t n, uint64_t p)
{
  return n > 0 && l < m->nlogical && n <= m->nlogical - l &&
         p < m->nphys && n <= m->nphys - p;
}

int
thin_map_add (struct thin_map *m, uint64_t l, uint64_t n, uint32_t p)
{
  if (!in_range (m, l, n, p)) {
    errno = EINVAL;
    return -1;
  }
  if (extmap_insert (m->runs, l, n, p) == -1)
    return -1;
  m->mapped += n;
  return 0;
}

int
thin_map_remove (struct thin_map *m, uint64_t l, uint64_t n)
{
  uint64_t gone;

  if (extmap_remove (m->runs, l, n, &gone) == -1)
    return -1;
  m->mapped -= gone;
  return 0;
}

size_t
thin_map_memory (const struct thin_map *m)
{
  return extmap_memory (m->runs);
}

uint64_t
thin_map_runs (const struct thin_map *m)
{
  return extmap_count (m->runs);
}

/* The free set: the complement of the runs' physical ranges. */

struct phys_run {
  uint32_t p, n;
};

struct collect {
  struct phys_run *a;
  size_t n;
};

static int
collect_run (const struct extent *x, void *opaque)
{
  struct collect *c = opaque;

  c->a[c->n++] = (struct phys_run) { x->value, (uint32_t) x->length };
  return 0;
}

static int
by_phys (const void *a, const void *b)
{
  const struct phys_run *x = a, *y = b;

  return x->p < y->p ? -1 : x->p > y->p;
}

/* Insert [from, to) into free if it is not empty. */
static int
add_gap (struct extmap *set, uint64_t from, uint64_t to)
{
  return to > from ? extmap_insert (set, from, to - from, 0) : 0;
}

struct extmap *
thin_map_free_set (const struct thin_map *m)
{
  struct collect c = { .n = 0 };
  struct extmap *set = extmap_new ();
  uint64_t end = 0;
  size_t count = extmap_count (m->runs);

  c.a = malloc (count * sizeof *c.a + 1);
  if (set == NULL || c.a == NULL)
    goto nomem;
  extmap_iterate (m->runs, 0, collect_run, &c);
  for (size_t i = 1; i < c.n; i++)
    if (c.a[i].p < c.a[i - 1].p) {  /* not already in order */
      qsort (c.a, c.n, sizeof *c.a, by_phys);
      break;
    }
  for (size_t i = 0; i < c.n; i++) {
    if (c.a[i].p < end || (uint64_t) c.a[i].p + c.a[i].n > m->nphys) {
      free (c.a);
      extmap_free (set);
      errno = EINVAL;
      return NULL;
    }
    if (add_gap (set, end, c.a[i].p) == -1)
      goto nomem;
    end = (uint64_t) c.a[i].p + c.a[i].n;
  }
  if (add_gap (set, end, m->nphys) == -1)
    goto nomem;
  free (c.a);
  return set;

 nomem:
  free (c.a);
  extmap_free (set);
  errno = ENOMEM;
  return NULL;
}

int
thin_map_replay_map (struct thin_map *m, struct extmap *free_set, uint64_t l,
                     uint64_t n, uint32_t p)
{
  struct extent x;
  uint64_t gap;
  uint32_t q;

  if (!in_range (m, l, n, p) ||
      !extmap_find_overlap (free_set, p, n, &x) || x.offset > p ||
      x.offset + x.length < p + n ||
      thin_map_lookup (m, l, n, &q, &gap) || gap < n) {
    errno = EINVAL;
    return -1;
  }
  return extmap_remove (free_set, p, n, NULL) == -1 ? -1
         : thin_map_add (m, l, n, p);
}

int
thin_map_replay_unmap (struct thin_map *m, struct extmap *free_set, uint64_t l,
                       uint64_t n, uint32_t p)
{
  uint64_t run;
  uint32_t q;

  if (!in_range (m, l, n, p) || !thin_map_lookup (m, l, n, &q, &run) ||
      q != p || run < n) {
    errno = EINVAL;
    return -1;
  }
  return extmap_insert (free_set, p, n, 0) == -1 ? -1
         : thin_map_remove (m, l, n);
}
