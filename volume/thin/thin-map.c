/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's slot table and allocator (see thin.h).
 * Pure bookkeeping: the caller holds the lock and does the I/O.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "log.h"
#include "thin.h"

int
thin_map_init (struct thin_map *m, uint64_t nlogical, uint32_t nphys)
{
  *m = (struct thin_map) { .nlogical = nlogical, .nphys = nphys };
  m->l2p = malloc (nlogical * sizeof *m->l2p);
  m->p2l = calloc (nphys, sizeof *m->p2l);
  m->pstate = calloc (nphys, sizeof *m->pstate);
  m->pins = calloc (nphys, sizeof *m->pins);
  m->freed = malloc (nphys * sizeof *m->freed);
  if (m->l2p == NULL || m->p2l == NULL || m->pstate == NULL ||
      m->pins == NULL || m->freed == NULL) {
    thin_map_free (m);
    dc_error ("thin: out of memory for a map of %" PRIu64 " logical and %"
              PRIu32 " physical slots", nlogical, nphys);
    errno = ENOMEM;
    return -1;
  }
  memset (m->l2p, 0xff, nlogical * sizeof *m->l2p);
  return 0;
}

void
thin_map_free (struct thin_map *m)
{
  free (m->l2p);
  free (m->p2l);
  free (m->pstate);
  free (m->pins);
  free (m->freed);
  free (m->undurable);
  m->l2p = m->p2l = m->pins = m->freed = NULL;
  m->pstate = NULL;
  m->undurable = NULL;
}

static void
set_mapping (struct thin_map *m, uint64_t l, uint32_t p, enum thin_pstate s)
{
  m->l2p[l] = p;
  m->p2l[p] = (uint32_t) l;
  m->pstate[p] = s;
  m->mapped++;
}

uint32_t
thin_map_alloc (struct thin_map *m, uint64_t l, bool *reused)
{
  uint32_t p;

  if (m->nfreed > 0) {
    p = m->freed[--m->nfreed];
    *reused = true;
  }
  else {
    while (m->next_clean < m->nphys && m->pstate[m->next_clean] != THIN_CLEAN)
      m->next_clean++;
    if (m->next_clean == m->nphys)
      return THIN_UNMAPPED;
    p = m->next_clean++;
    *reused = false;
  }
  set_mapping (m, l, p, THIN_INIT);
  return p;
}

void
thin_map_mapped (struct thin_map *m, uint32_t p)
{
  m->pstate[p] = THIN_MAPPED;
}

void
thin_map_abort (struct thin_map *m, uint32_t p)
{
  m->l2p[m->p2l[p]] = THIN_UNMAPPED;
  m->mapped--;
  m->pstate[p] = THIN_FREED;
  m->freed[m->nfreed++] = p;
}

/* The list grows with the unmaps between two commits, not with the
 * pool: 16 bytes a slot for every slot would double the map's memory.
 */
int
thin_map_reserve_unmap (struct thin_map *m)
{
  if (m->nundurable == m->capundurable) {
    void *p = grow_array (m->undurable, &m->capundurable,
                          sizeof *m->undurable, 64);

    if (p == NULL) {
      dc_error ("thin: out of memory for the unmap list");
      return -1;
    }
    m->undurable = p;
  }
  return 0;
}

uint32_t
thin_map_unmap (struct thin_map *m, uint64_t l, uint64_t seq)
{
  uint32_t p = m->l2p[l];

  m->l2p[l] = THIN_UNMAPPED;
  m->mapped--;
  m->pstate[p] = THIN_UNMAPPING;
  m->undurable[m->nundurable++] = (struct thin_undurable) {
    .seq = seq, .phys = p,
  };
  return p;
}

void
thin_map_unmapped (struct thin_map *m, uint32_t p)
{
  m->pstate[p] = THIN_UNDURABLE;
}

/* A slot still UNMAPPING stays behind (its discard is being recorded);
 * the order of those left is kept.
 */
uint32_t
thin_map_commit (struct thin_map *m, uint64_t seq)
{
  uint32_t kept = 0, moved = 0;

  for (uint32_t i = 0; i < m->nundurable; i++) {
    struct thin_undurable u = m->undurable[i];

    if (u.seq <= seq && m->pstate[u.phys] == THIN_UNDURABLE) {
      m->pstate[u.phys] = THIN_FREED;
      m->freed[m->nfreed++] = u.phys;
      moved++;
    }
    else
      m->undurable[kept++] = u;
  }
  m->nundurable = kept;
  return moved;
}

uint32_t
thin_map_pending_free (const struct thin_map *m)
{
  return m->nundurable;
}

/* Recovery: no slot is INIT, UNMAPPING or UNDURABLE; the freed LIFO is
 * rebuilt once at the end of the replay by thin_map_load's rule.
 */
int
thin_map_replay_map (struct thin_map *m, uint64_t l, uint32_t p)
{
  if (l >= m->nlogical || p >= m->nphys || m->l2p[l] != THIN_UNMAPPED ||
      m->pstate[p] == THIN_MAPPED)
    return -1;
  set_mapping (m, l, p, THIN_MAPPED);
  return 0;
}

int
thin_map_replay_unmap (struct thin_map *m, uint64_t l, uint32_t p)
{
  if (l >= m->nlogical || p >= m->nphys || m->l2p[l] != p)
    return -1;
  m->l2p[l] = THIN_UNMAPPED;
  m->mapped--;
  /* It was used: reuse it before clean slots. */
  m->pstate[p] = THIN_FREED;
  return 0;
}

/* Freed slots go on the LIFO in descending order, so that the lowest is
 * reused first, as clean ones are.
 */
static void
rebuild_freed (struct thin_map *m)
{
  m->nfreed = 0;
  for (uint32_t p = m->nphys; p-- > 0; )
    if (m->pstate[p] == THIN_FREED)
      m->freed[m->nfreed++] = p;
}

int
thin_map_load (struct thin_map *m, const uint32_t *l2p, uint32_t high_water)
{
  if (high_water > m->nphys)
    return -1;
  memset (m->pstate, THIN_CLEAN, m->nphys);
  for (uint32_t p = 0; p < high_water; p++)
    m->pstate[p] = THIN_FREED;
  m->mapped = 0;
  m->next_clean = high_water;
  m->nundurable = 0;
  memset (m->l2p, 0xff, m->nlogical * sizeof *m->l2p);
  for (uint64_t l = 0; l < m->nlogical; l++)
    if (l2p[l] != THIN_UNMAPPED && thin_map_replay_map (m, l, l2p[l]) == -1)
      return -1;
  rebuild_freed (m);
  return 0;
}

void
thin_map_replay_done (struct thin_map *m)
{
  rebuild_freed (m);
}
