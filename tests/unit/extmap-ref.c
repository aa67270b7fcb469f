/* discardcache tests: the extent map's reference model (extmap-ref.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "extmap-ref.h"

static uint64_t
end_of (const struct extent *e)
{
  return e->offset + e->length;
}

bool
ref_valid (uint64_t offset, uint64_t length)
{
  return length > 0 && offset + length >= offset &&
    offset + length <= EXTMAP_MAX_END;
}

static void
ref_reserve (struct extmap_ref *r, size_t n)
{
  if (n > r->cap) {
    r->cap = MAX (n, 2 * r->cap);
    r->v = realloc (r->v, r->cap * sizeof *r->v);
    if (r->v == NULL) {
      perror ("extmap-ref: realloc");
      abort ();
    }
  }
}

/* Index of the first extent ending after x, or at x too if touch. */
static size_t
ref_first (const struct extmap_ref *r, uint64_t x, bool touch)
{
  size_t lo = 0, hi = r->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint64_t end = end_of (&r->v[mid]);

    if (end > x || (touch && end == x))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* Replace v[i0..i1) by the cnt extents in add. */
static void
ref_splice (struct extmap_ref *r, size_t i0, size_t i1,
            const struct extent *add, size_t cnt)
{
  if (i0 == i1 && cnt == 0)
    return;                     /* and v may still be NULL */
  ref_reserve (r, r->n - (i1 - i0) + cnt);
  memmove (&r->v[i0 + cnt], &r->v[i1], (r->n - i1) * sizeof *r->v);
  memcpy (&r->v[i0], add, cnt * sizeof *add);
  r->n = r->n - (i1 - i0) + cnt;
}

void
ref_insert (struct extmap_ref *r, uint64_t s, uint64_t len, uint32_t t)
{
  struct extent m = { s, 0, t };
  uint64_t e = s + len;
  size_t i0 = ref_first (r, s, true), i1;

  for (i1 = i0; i1 < r->n && r->v[i1].offset <= e; i1++) {
    m.offset = MIN (m.offset, r->v[i1].offset);
    e = MAX (e, end_of (&r->v[i1]));
    m.time = MAX (m.time, r->v[i1].time);
  }
  m.length = e - m.offset;
  ref_splice (r, i0, i1, &m, 1);
}

uint64_t
ref_remove (struct extmap_ref *r, uint64_t s, uint64_t len)
{
  uint64_t e = s + len, removed = 0;
  struct extent keep[2];
  size_t i0 = ref_first (r, s, false), i1, k = 0;

  for (i1 = i0; i1 < r->n && r->v[i1].offset < e; i1++) {
    const struct extent *x = &r->v[i1];

    removed += MIN (e, end_of (x)) - MAX (s, x->offset);
    if (x->offset < s)
      keep[k++] = (struct extent) { x->offset, s - x->offset, x->time };
    if (end_of (x) > e)
      keep[k++] = (struct extent) { e, end_of (x) - e, x->time };
  }
  ref_splice (r, i0, i1, keep, k);
  return removed;
}

void
ref_rebase_time (struct extmap_ref *r, uint32_t delta)
{
  for (size_t i = 0; i < r->n; i++)
    r->v[i].time = r->v[i].time > delta ? r->v[i].time - delta : 0;
}

void
ref_clear (struct extmap_ref *r)
{
  r->n = 0;
}

void
ref_free (struct extmap_ref *r)
{
  free (r->v);
  *r = (struct extmap_ref) { NULL, 0, 0 };
}

uint64_t
ref_bytes (const struct extmap_ref *r)
{
  uint64_t b = 0;

  for (size_t i = 0; i < r->n; i++)
    b += r->v[i].length;
  return b;
}

const struct extent *
ref_find (const struct extmap_ref *r, uint64_t x, uint64_t end)
{
  size_t i = ref_first (r, x, false);

  return i < r->n && r->v[i].offset < end ? &r->v[i] : NULL;
}

const struct extent *
ref_largest_before (const struct extmap_ref *r, uint32_t cutoff)
{
  const struct extent *best = NULL;

  for (size_t i = 0; i < r->n; i++) {
    if (r->v[i].time <= cutoff && (!best || r->v[i].length > best->length))
      best = &r->v[i];
  }
  return best;
}

const struct extent *
ref_oldest (const struct extmap_ref *r)
{
  const struct extent *best = NULL;

  for (size_t i = 0; i < r->n; i++) {
    if (!best || r->v[i].time < best->time)
      best = &r->v[i];
  }
  return best;
}
