/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's free physical slots (see thin-pure.h), three
 * plain extent maps of slot ranges and an index:
 *
 *   reserve  slots freed by an unmap and kept from the device (reserve=):
 *            no discard was sent, so they are reused first of all;
 *   pending  slots freed by an unmap whose discard the engine may still
 *            hold: a write there cancels it, so they are reused next.
 *            In both, each run's time is the sequence number of its last
 *            free; a run that grows by merging becomes the most recent.
 *   clean    free slots with nothing to discard (never used since the
 *            map was loaded, or whose discard has gone out), not known
 *            to read as zeros;
 *   zero     the same, known to read as zeros.
 * Clean and zero are kept apart rather than zero as a part of clean, so
 * that a start on a sparse backend takes the whole free set as its zero
 * map as it is, with no insert per free run.
 *
 * Best fit by run length needs the reserve's and the pending runs
 * ordered by length, then recency, which the extent map's summaries (longest, oldest) do not
 * give.  So each has a second plain extent map, its index: one extent
 * of length 1 per run, at the key
 *
 *   class << 33 | (UINT32_MAX - seq) << 1        (time: the run's start)
 *
 * where class is the run's length up to 64 slots and a power-of-two
 * bucket above.  The first key at or after (class of n) << 33 is the
 * most recently freed run of the shortest length that holds n: one
 * O(log n) search, whatever the number of runs.  The keys are even, so
 * no two touch and merge.  Lengths above 64 slots share a bucket, where
 * the search looks at most BUCKET_SCAN runs for one that holds n before
 * it moves to the next bucket: best fit is exact up to 64 slots (4 MiB
 * of 64k slots) and within a factor of two above.
 *
 * Every key is checked against its runs before it is used (a run
 * starting at that slot with that sequence number), so a key that could
 * not be added or removed for want of memory only costs a missed pick.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "arith.h"
#include "log.h"
#include "thin-pure.h"
#include "verify.h"

#define EXACT_CLASSES 64
#define BUCKET_SCAN 16

static unsigned
length_class (uint64_t n)
{
  if (n <= EXACT_CLASSES)
    return (unsigned) n;
  return EXACT_CLASSES + (63 - __builtin_clzll (n)) - 5;
}

static uint64_t
index_key (uint64_t length, uint32_t seq)
{
  return (uint64_t) length_class (length) << 33 |
         (uint64_t) (UINT32_MAX - seq) << 1;
}
static int
freed_init (struct thin_freed *f)
{
  *f = (struct thin_freed) { .next_seq = 1, .seq_limit = UINT32_MAX };
  f->runs = extmap_new ();
  f->index = extmap_new ();
  return f->runs && f->index ? 0 : -1;
}

static void
freed_free (struct thin_freed *f)
{
  extmap_free (f->runs);
  extmap_free (f->index);
  f->runs = f->index = NULL;
}

int
thin_space_init (struct thin_space *s)
{
  *s = (struct thin_space) { .lost = 0 };
  s->clean = extmap_new ();
  s->zero = extmap_new ();
  if (freed_init (&s->pending) == -1 || freed_init (&s->reserve) == -1 ||
      !s->clean || !s->zero) {
    thin_space_free (s);
    dc_error ("thin: out of memory for the free space maps");
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

void
thin_space_free (struct thin_space *s)
{
  freed_free (&s->pending);
  freed_free (&s->reserve);
  extmap_free (s->clean);
  extmap_free (s->zero);
  s->clean = s->zero = NULL;
}

static void
lose (struct thin_space *s, uint64_t n)
{
  if (s->lost == 0)
    dc_error ("thin: out of memory for the free space maps: %" PRIu64
              " slots are lost until the next start", n);
  s->lost += n;
}

/* Index x (a run of f) or forget it: best effort, see above. */
static void
index_add (struct thin_freed *f, const struct extent *x)
{
  extmap_insert (f->index, index_key (x->length, x->time), 1, x->offset);
}

/* Removing a whole extent never allocates. */
static void
index_remove (struct thin_freed *f, const struct extent *x)
{
  extmap_remove (f->index, index_key (x->length, x->time), 1, NULL);
}

/* The run of f that starts at p, or contains it. */
static bool
run_at (const struct thin_freed *f, uint64_t p, struct extent *x)
{
  return extmap_find_overlap (f->runs, p, 1, x);
}

/* Number the runs afresh in the order they were freed, before the
 * sequence numbers wrap (once in 2^32 frees).
 */
static int
by_time (const void *a, const void *b)
{
  const struct extent *x = a, *y = b;

  return x->time < y->time ? -1 : x->time > y->time;
}

struct gather {
  struct extent *a;
  size_t n;
};

static int
gather_run (const struct extent *x, void *opaque)
{
  struct gather *g = opaque;

  g->a[g->n++] = *x;
  return 0;
}

static void
renumber (struct thin_freed *f)
{
  struct gather g = { .n = 0 };
  struct extmap *runs = extmap_new (), *index = extmap_new ();

  g.a = malloc (extmap_count (f->runs) * sizeof *g.a + 1);
  if (g.a == NULL || runs == NULL || index == NULL)
    goto fail;
  extmap_iterate (f->runs, 0, gather_run, &g);
  qsort (g.a, g.n, sizeof *g.a, by_time);
  for (size_t i = 0; i < g.n; i++) {
    g.a[i].time = (uint32_t) i + 1;
    if (extmap_insert (runs, g.a[i].offset, g.a[i].length,
                       g.a[i].time) == -1)
      goto fail;
    extmap_insert (index, index_key (g.a[i].length, g.a[i].time), 1,
                   g.a[i].offset);
  }
  extmap_free (f->runs);
  extmap_free (f->index);
  f->runs = runs;
  f->index = index;
  f->next_seq = (uint32_t) g.n + 1;
  free (g.a);
  return;

 fail:
  /* The numbers wrap: only recency order suffers (the keys are checked). */
  dc_error ("thin: out of memory renumbering the free slots");
  free (g.a);
  extmap_free (runs);
  extmap_free (index);
  f->next_seq = 1;
}

static void
freed_add (struct thin_space *s, struct thin_freed *f, uint64_t p, uint64_t n)
{
  struct extent left, right, x;
  bool has_left, has_right;
  uint32_t seq;

  if (f->next_seq >= f->seq_limit)
    renumber (f);
  seq = f->next_seq++;
  /* The neighbours this run merges with lose their keys. */
  has_left = p > 0 && run_at (f, p - 1, &left);
  has_right = run_at (f, p + n, &right) && right.offset == p + n;
  if (has_left)
    index_remove (f, &left);
  if (has_right)
    index_remove (f, &right);
  if (extmap_insert (f->runs, p, n, seq) == -1) {
    if (has_left)
      index_add (f, &left);
    if (has_right)
      index_add (f, &right);
    lose (s, n);
    return;
  }
  if (run_at (f, p, &x))
    index_add (f, &x);
}

/* Whether no slot of [p, p+n) is free in any set: a slot freed twice
 * would be allocated twice, to two logical slots (debug builds; O(log
 * n) a set).
 */
static bool __attribute__ ((unused))
nowhere_free (const struct thin_space *s, uint64_t p, uint64_t n)
{
  struct extent x;

  return !extmap_find_overlap (s->reserve.runs, p, n, &x) &&
         !extmap_find_overlap (s->pending.runs, p, n, &x) &&
         !extmap_find_overlap (s->zero, p, n, &x) &&
         !extmap_find_overlap (s->clean, p, n, &x);
}

void
thin_space_add_pending (struct thin_space *s, uint64_t p, uint64_t n)
{
  DEBUG_VERIFY (nowhere_free (s, p, n));
  freed_add (s, &s->pending, p, n);
}

void
thin_space_add_reserve (struct thin_space *s, uint64_t p, uint64_t n)
{
  DEBUG_VERIFY (nowhere_free (s, p, n));
  freed_add (s, &s->reserve, p, n);
}

void
thin_space_add_clean (struct thin_space *s, uint64_t p, uint64_t n,
                      bool zero)
{
  DEBUG_VERIFY (nowhere_free (s, p, n));
  if (extmap_insert (zero ? s->zero : s->clean, p, n, 0) == -1)
    lose (s, n);
}

void
thin_space_adopt (struct thin_space *s, struct extmap *free_set, bool zero)
{
  struct extmap **to = zero ? &s->zero : &s->clean;

  extmap_free (*to);
  *to = free_set;
}

enum thin_free_kind
thin_space_find (const struct thin_space *s, uint64_t p, struct extent *run)
{
  if (run_at (&s->reserve, p, run))
    return THIN_RESERVE;
  if (run_at (&s->pending, p, run))
    return THIN_PENDING;
  if (extmap_find_overlap (s->zero, p, 1, run))
    return THIN_ZERO;
  if (extmap_find_overlap (s->clean, p, 1, run))
    return THIN_CLEAN;
  return THIN_NOT_FREE;
}

/* The run a key of f's index names, if the key is current. */
static bool
key_run (const struct thin_freed *f, const struct extent *k, struct extent *x)
{
  uint32_t seq = UINT32_MAX - (uint32_t) (k->offset >> 1);

  return run_at (f, k->value, x) && x->offset == k->value &&
         x->time == seq && index_key (x->length, seq) == k->offset;
}

static bool
freed_best (struct thin_freed *f, uint64_t n, struct extent *run)
{
  uint64_t from = (uint64_t) length_class (n) << 33;
  unsigned scanned = 0;
  struct extent k;

  while (extmap_find_from (f->index, from, &k)) {
    if (!key_run (f, &k, run)) {
      extmap_remove (f->index, k.offset, 1, NULL);      /* stale */
      from = k.offset + 1;
      continue;
    }
    if (run->length >= n)
      return true;
    /* A shorter run in n's bucket: look a little further, then on. */
    if (++scanned < BUCKET_SCAN)
      from = k.offset + 1;
    else
      from = ((k.offset >> 33) + 1) << 33;
  }
  return extmap_largest (f->runs, run);
}

bool
thin_space_best_pending (struct thin_space *s, uint64_t n, struct extent *run)
{
  return freed_best (&s->pending, n, run);
}

bool
thin_space_best_reserve (struct thin_space *s, uint64_t n, struct extent *run)
{
  return freed_best (&s->reserve, n, run);
}

bool
thin_space_largest_reserve (const struct thin_space *s, struct extent *run)
{
  return extmap_largest (s->reserve.runs, run);
}

enum thin_free_kind
thin_space_largest_clean (const struct thin_space *s, uint64_t want,
                          struct extent *run)
{
  struct extent z;

  if (!extmap_largest (s->zero, &z))
    return extmap_largest (s->clean, run) ? THIN_CLEAN : THIN_NOT_FREE;
  if (z.length >= want || !extmap_largest (s->clean, run) ||
      z.length > run->length ||
      (z.length == run->length && z.offset < run->offset)) {
    *run = z;
    return THIN_ZERO;
  }
  return THIN_CLEAN;
}

bool
thin_space_oldest_pending (const struct thin_space *s, struct extent *run)
{
  return extmap_oldest (s->pending.runs, run);
}

bool
thin_space_is_zero (const struct thin_space *s, uint64_t p, uint64_t n)
{
  struct extent x;

  return extmap_find_overlap (s->zero, p, n, &x) && x.offset <= p &&
         x.offset + x.length >= p + n;
}

/* Clean slots move to zero; a failure for want of memory only costs
 * knowledge.
 */
void
thin_space_learn_zero (struct thin_space *s, uint64_t p, uint64_t n)
{
  uint64_t end = p + n;
  struct extent x;

  while (p < end && extmap_find_from (s->clean, p, &x) && x.offset < end) {
    uint64_t from = MAX (p, x.offset), to = MIN (end, x.offset + x.length);

    if (extmap_insert (s->zero, from, to - from, 0) == 0 &&
        extmap_remove (s->clean, from, to - from, NULL) == -1)
      extmap_remove (s->zero, from, to - from, NULL);
    p = to;
  }
}

/* What is left of run x of f once [p, p+n) is taken: the head keeps its
 * place in the order; a tail after a cut in the middle (the allocator
 * never cuts there) is freed again, so its key is its own.
 */
static void
reindex_rest (struct thin_space *s, struct thin_freed *f,
              const struct extent *x, uint64_t p, uint64_t n)
{
  uint64_t end = x->offset + x->length;
  struct extent head;

  if (p > x->offset && run_at (f, x->offset, &head))
    index_add (f, &head);
  if (p + n < end) {
    if (p > x->offset) {
      extmap_remove (f->runs, p + n, end - (p + n), NULL);
      freed_add (s, f, p + n, end - (p + n));
    }
    else {
      struct extent tail;

      if (run_at (f, p + n, &tail))
        index_add (f, &tail);
    }
  }
}

int
thin_space_take_from (struct thin_space *s, enum thin_free_kind kind,
                      const struct extent *x, uint64_t p, uint64_t n)
{
  struct thin_freed *f;

  if (kind == THIN_NOT_FREE || p < x->offset ||
      p + n > x->offset + x->length) {
    errno = EINVAL;
    return -1;
  }
  if (kind == THIN_ZERO || kind == THIN_CLEAN)
    return extmap_remove (kind == THIN_ZERO ? s->zero : s->clean, p, n,
                          NULL);
  f = kind == THIN_RESERVE ? &s->reserve : &s->pending;
  index_remove (f, x);
  if (extmap_remove (f->runs, p, n, NULL) == -1) {
    index_add (f, x);
    return -1;
  }
  reindex_rest (s, f, x, p, n);
  return 0;
}

int
thin_space_take (struct thin_space *s, uint64_t p, uint64_t n)
{
  struct extent x;
  enum thin_free_kind kind = thin_space_find (s, p, &x);

  return thin_space_take_from (s, kind, &x, p, n);
}

uint64_t
thin_space_slots (const struct thin_space *s)
{
  return extmap_bytes (s->reserve.runs) + extmap_bytes (s->pending.runs) +
         extmap_bytes (s->clean) + extmap_bytes (s->zero);
}

uint64_t
thin_space_reserve_slots (const struct thin_space *s)
{
  return extmap_bytes (s->reserve.runs);
}

const struct extmap *
thin_space_reserve_runs (const struct thin_space *s)
{
  return s->reserve.runs;
}

void
thin_space_get_stats (const struct thin_space *s, struct thin_space_stats *st)
{
  struct extent x;

  st->pending = extmap_bytes (s->pending.runs);
  st->pending_runs = extmap_count (s->pending.runs);
  st->pending_largest = extmap_largest (s->pending.runs, &x) ? x.length : 0;
  st->reserve = extmap_bytes (s->reserve.runs);
  st->reserve_runs = extmap_count (s->reserve.runs);
  st->zero = extmap_bytes (s->zero);
  st->clean = extmap_bytes (s->clean) + st->zero;
  st->clean_runs = extmap_count (s->clean) + extmap_count (s->zero);
  st->clean_largest = thin_space_largest_clean (s, UINT64_MAX, &x) !=
                      THIN_NOT_FREE ? x.length : 0;
  st->memory = extmap_memory (s->pending.runs) +
               extmap_memory (s->pending.index) +
               extmap_memory (s->reserve.runs) +
               extmap_memory (s->reserve.index) +
               extmap_memory (s->clean) + extmap_memory (s->zero);
}
