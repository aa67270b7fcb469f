/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: the extent map's reference model (extmap-ref.h). */
#include <config.h>

#include <inttypes.h>
#include <stdarg.h>
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

/* Always leaves r->v non-NULL: memmove to or from NULL is undefined even
 * for zero bytes, and UBSan says so.
 */
static void
ref_reserve (struct extmap_ref *r, size_t n)
{
  if (n > r->cap || r->v == NULL) {
    r->cap = MAX (MAX (n, 2 * r->cap), (size_t) 64);
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

/* A run joins a neighbour only where offsets and values both continue. */
static int
ref_insert_run (struct extmap_ref *r, uint64_t s, uint64_t len, uint32_t v)
{
  struct extent m = { .offset = s, .length = len, .value = v };
  size_t i0 = ref_first (r, s, true), i1 = i0;

  if (v + len > (UINT64_C (1) << 32))
    return -1;
  if (i0 < r->n && r->v[i0].offset < s + len && end_of (&r->v[i0]) > s)
    return -1;
  if (i0 + 1 < r->n && end_of (&r->v[i0]) == s && r->v[i0 + 1].offset < s + len)
    return -1;
  if (i0 < r->n && end_of (&r->v[i0]) == s) {
    if (r->v[i0].time + r->v[i0].length == v) {
      m.offset = r->v[i0].offset;
      m.time = r->v[i0].time;
      m.length += r->v[i0].length;
      i1 = i0 + 1;
    }
    else
      i0 = i1 = i0 + 1;
  }
  if (i1 < r->n && r->v[i1].offset == s + len &&
      v + len == r->v[i1].time) {
    m.length += r->v[i1].length;
    i1++;
  }
  ref_splice (r, i0, i1, &m, 1);
  return 0;
}

int
ref_insert (struct extmap_ref *r, uint64_t s, uint64_t len, uint32_t t)
{
  struct extent m = { .offset = s, .length = 0, .time = t };
  uint64_t e = s + len;
  size_t i0 = ref_first (r, s, true), i1;

  for (i1 = i0; i1 < r->n && r->v[i1].offset <= e; i1++) {
    m.offset = MIN (m.offset, r->v[i1].offset);
    e = MAX (e, end_of (&r->v[i1]));
    m.time = MAX (m.time, r->v[i1].time);
  }
  if (r->runs)
    return ref_insert_run (r, s, len, t);
  m.length = e - m.offset;
  ref_splice (r, i0, i1, &m, 1);
  return 0;
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
      keep[k++] = (struct extent) {
        .offset = x->offset, .length = s - x->offset, .time = x->time,
      };
    if (end_of (x) > e)
      keep[k++] = (struct extent) {
        .offset = e, .length = end_of (x) - e,
        .time = r->runs ? x->time + (uint32_t) (e - x->offset) : x->time,
      };
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
  r->v = NULL;
  r->n = r->cap = 0;
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

static bool
ref_holds_granule (const struct extmap_ref *r, const struct extent *x)
{
  uint64_t g = r->granularity;

  return g && round_down (end_of (x), g) > round_up (x->offset, g);
}

const struct extent *
ref_oldest_forwardable (const struct extmap_ref *r)
{
  const struct extent *best = NULL;

  for (size_t i = 0; i < r->n; i++) {
    const struct extent *x = &r->v[i];

    if (x->time != UINT32_MAX && x->length >= r->minlen &&
        ref_holds_granule (r, x) && (!best || x->time < best->time))
      best = x;
  }
  return best;
}

const struct extent *
ref_largest_aligned_before (const struct extmap_ref *r, uint32_t cutoff,
                            uint64_t minlen)
{
  const struct extent *best = NULL;

  for (size_t i = 0; i < r->n; i++) {
    const struct extent *x = &r->v[i];

    if (x->time <= cutoff && x->length >= minlen && ref_holds_granule (r, x) &&
        (!best || x->length > best->length))
      best = x;
  }
  return best;
}

/* ---- the map against the reference ---- */

/* Defined in extmap/extmap.c for the tests; not part of extmap.h. */
extern const char *extmap_check (const struct extmap *map);

const char *const ref_query_names[REF_QUERIES] = {
  [REF_LARGEST] = "largest", [REF_OLDEST] = "oldest",
  [REF_FIND_OVERLAP] = "find_overlap",
  [REF_FIND_FROM] = "find_from", [REF_ITERATE] = "iterate",
  [REF_OLDEST_FORWARDABLE] = "oldest_forwardable",
  [REF_LARGEST_ALIGNED_BEFORE] = "largest_aligned_before",
};

static char message[256];

static const char *differs (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

static const char *
differs (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (message, sizeof message, fmt, ap);
  va_end (ap);
  return message;
}

static const char *
compare_extent (const char *q, bool got, const struct extent *e,
                const struct extent *want)
{
  if (got != (want != NULL))
    return differs ("%s: map says %s, reference says %s", q,
                    got ? "found" : "none", want ? "found" : "none");
  if (want && (e->offset != want->offset || e->length != want->length ||
               e->time != want->time))
    return differs ("%s: map [%" PRIu64 "+%" PRIu64 " t%" PRIu32 "], "
                    "reference [%" PRIu64 "+%" PRIu64 " t%" PRIu32 "]", q,
                    e->offset, e->length, e->time,
                    want->offset, want->length, want->time);
  return NULL;
}

/* An iteration compared extent by extent with the reference's. */
struct walk {
  const struct extent *want;
  size_t left, seen, stop_after;
  const char *err;
};

static int
walk_visit (const struct extent *e, void *opaque)
{
  struct walk *w = opaque;

  w->err = compare_extent ("iterate", true, e,
                           w->seen < w->left ? &w->want[w->seen] : NULL);
  if (w->err)
    return -1;
  w->seen++;
  return w->seen == w->stop_after ? 42 : 0;
}

/* Iterate from x for at most stop_after extents. */
static const char *
compare_iteration (const struct extmap *map, const struct extmap_ref *r,
                   uint64_t x, size_t stop_after)
{
  const struct extent *first = ref_find (r, x, UINT64_MAX);
  struct walk w = { first, first ? (size_t) (r->v + r->n - first) : 0,
                    0, stop_after, NULL };
  int ret = extmap_iterate (map, x, walk_visit, &w);

  if (w.err)
    return w.err;
  if (ret != (w.seen == w.stop_after ? 42 : 0))
    return differs ("iterate returned %d after %zu extents", ret, w.seen);
  if (w.seen != MIN (w.left, w.stop_after))
    return differs ("iterate saw %zu extents, reference %zu", w.seen,
                    MIN (w.left, w.stop_after));
  return NULL;
}

const char *
ref_check_query (const struct extmap *map, const struct extmap_ref *r,
                 enum ref_query q, const struct ref_query_args *a)
{
  const char *name = ref_query_names[q];
  struct extent e;
  uint64_t end;

  switch (q) {
  case REF_LARGEST:
    return compare_extent (name, extmap_largest (map, &e), &e,
                           ref_largest_before (r, UINT32_MAX));
  case REF_OLDEST:
    return compare_extent (name, extmap_oldest (map, &e), &e, ref_oldest (r));
  case REF_FIND_OVERLAP:
    /* Nothing overlaps an empty range; an end past 2^64 is cut. */
    end = a->x + a->len < a->x ? UINT64_MAX : a->x + a->len;
    return compare_extent (name, extmap_find_overlap (map, a->x, a->len, &e),
                           &e, a->len ? ref_find (r, a->x, end) : NULL);
  case REF_FIND_FROM:
    return compare_extent (name, extmap_find_from (map, a->x, &e), &e,
                           ref_find (r, a->x, UINT64_MAX));
  case REF_OLDEST_FORWARDABLE:
    return compare_extent (name, extmap_oldest_forwardable (map, &e), &e,
                           ref_oldest_forwardable (r));
  case REF_LARGEST_ALIGNED_BEFORE:
    return compare_extent (name,
                           extmap_largest_aligned_before (map, a->cutoff,
                                                          a->minlen, &e),
                           &e, ref_largest_aligned_before (r, a->cutoff,
                                                           a->minlen));
  default:
    return compare_iteration (map, r, a->x, a->stop_after);
  }
}

const char *
ref_check_all (const struct extmap *map, const struct extmap_ref *r)
{
  const char *err = extmap_check (map);

  if (err)
    return differs ("invariant: %s", err);
  if ((err = compare_iteration (map, r, 0, SIZE_MAX)) != NULL)
    return err;
  if (extmap_count (map) != r->n)
    return differs ("count %zu, reference %zu", extmap_count (map), r->n);
  if (extmap_bytes (map) != ref_bytes (r))
    return differs ("bytes %" PRIu64 ", reference %" PRIu64,
                    extmap_bytes (map), ref_bytes (r));
  if (r->granularity) {
    uint64_t aligned = 0, sub = 0, g = r->granularity;

    for (size_t i = 0; i < r->n; i++) {
      uint64_t a = round_up (r->v[i].offset, g);
      uint64_t b = round_down (end_of (&r->v[i]), g);

      if (b > a)
        aligned += b - a;
      else
        sub += r->v[i].length;
    }
    if (extmap_aligned_bytes (map) != aligned ||
        extmap_subgranule_bytes (map) != sub)
      return differs ("granule totals %" PRIu64 " aligned, %" PRIu64
                      " sub-granule; reference %" PRIu64 ", %" PRIu64,
                      extmap_aligned_bytes (map),
                      extmap_subgranule_bytes (map), aligned, sub);
  }
  return NULL;
}
