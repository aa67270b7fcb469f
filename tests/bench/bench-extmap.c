/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: extent map microbenchmark (`make bench`).
 *
 * Runs each scenario on the extent map and on a baseline built the
 * obvious way on glibc's tsearch (a red-black tree of malloc'd
 * extents), in the same process, and prints ns/op, bytes/extent and
 * the ratio.  Figures are printed, never asserted: docs/benchmarks.md
 * records them with a reading against the targets.
 *
 *   bench-extmap [-r REPS] [-s SCALE] [-t SCENARIOS]
 * REPS (default 3) runs of each extmap scenario, and of the cheap
 * baseline ones; SCALE (default 1) multiplies every size, for a quick
 * try (-s 0.05); SCENARIOS picks some, by number (-t 35).
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <search.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arith.h"
#include "extmap.h"
#include "splitmix.h"

#define KiB UINT64_C (1024)
#define GiB (KiB * KiB * KiB)
#define MAX_REPS 9

/* ---- the two implementations behind one interface ---- */

struct impl {
  const char *name;
  void *(*create) (void);
  void (*destroy) (void *m);
  void (*insert) (void *m, uint64_t offset, uint64_t length, uint32_t t);
  void (*remove) (void *m, uint64_t offset, uint64_t length);
  bool (*overlap) (void *m, uint64_t offset, uint64_t length);
  bool (*largest) (void *m, struct extent *out);
  bool (*oldest) (void *m, struct extent *out);
  size_t (*count) (void *m);
  size_t (*memory) (void *m);   /* bytes held, by the map's own account */
};

static void
die (const char *what)
{
  perror (what);
  exit (EXIT_FAILURE);
}

static void *
em_create (void)
{
  struct extmap *map = extmap_new ();

  if (map == NULL)
    die ("extmap_new");
  return map;
}

static void
em_destroy (void *m)
{
  extmap_free (m);
}

static void
em_insert (void *m, uint64_t offset, uint64_t length, uint32_t t)
{
  if (extmap_insert (m, offset, length, t) == -1)
    die ("extmap_insert");
}

static void
em_remove (void *m, uint64_t offset, uint64_t length)
{
  if (extmap_remove (m, offset, length, NULL) == -1)
    die ("extmap_remove");
}

static bool
em_overlap (void *m, uint64_t offset, uint64_t length)
{
  struct extent e;

  return extmap_find_overlap (m, offset, length, &e);
}

static bool
em_largest (void *m, struct extent *out)
{
  return extmap_largest (m, out);
}

static bool
em_oldest (void *m, struct extent *out)
{
  return extmap_oldest (m, out);
}

static size_t
em_count (void *m)
{
  return extmap_count (m);
}

static size_t
em_memory (void *m)
{
  return extmap_memory (m);
}

static const struct impl extmap_impl = {
  "extmap", em_create, em_destroy, em_insert, em_remove, em_overlap,
  em_largest, em_oldest, em_count, em_memory,
};

/* The baseline: each extent a malloc'd struct in a tsearch tree ordered
 * by offset.  Lookups compare ranges, treating overlapping (or, for
 * merging, touching) ranges as equal, so tfind finds one of them; an
 * insert deletes every touching extent and inserts the merged one, a
 * remove trims in place, and largest/oldest walk the whole tree (tsearch
 * keeps no per-subtree data, and has no lower-bound search).
 */
struct bext {
  uint64_t offset, length;
  uint32_t time;
};

struct tmap {
  void *root;
  size_t count;
};

static int
cmp_offset (const void *a, const void *b)
{
  const struct bext *x = a, *y = b;

  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Ranges that overlap compare equal, and with touch, adjacent ones too. */
static int
cmp_range (const struct bext *x, const struct bext *y, bool touch)
{
  if (x->offset + x->length < y->offset + !touch)
    return -1;
  if (y->offset + y->length < x->offset + !touch)
    return 1;
  return 0;
}

static int
cmp_overlap (const void *a, const void *b)
{
  return cmp_range (a, b, false);
}

static int
cmp_touch (const void *a, const void *b)
{
  return cmp_range (a, b, true);
}

static void *
ts_create (void)
{
  struct tmap *tm = calloc (1, sizeof *tm);

  if (tm == NULL)
    die ("calloc");
  return tm;
}

static void
ts_destroy (void *m)
{
  struct tmap *tm = m;

  tdestroy (tm->root, free);
  free (tm);
}

static void
ts_add (struct tmap *tm, const struct bext *e)
{
  struct bext *n = malloc (sizeof *n);

  if (n == NULL)
    die ("malloc");
  *n = *e;
  if (tsearch (n, &tm->root, cmp_offset) == NULL)
    die ("tsearch");
  tm->count++;
}

static void
ts_delete (struct tmap *tm, struct bext *x)
{
  tdelete (x, &tm->root, cmp_offset);
  free (x);
  tm->count--;
}

static void
ts_insert (void *m, uint64_t offset, uint64_t length, uint32_t t)
{
  struct tmap *tm = m;
  struct bext key = { offset, length, t };
  struct bext **found;

  while ((found = tfind (&key, &tm->root, cmp_touch)) != NULL) {
    struct bext *x = *found;
    uint64_t end = MAX (key.offset + key.length, x->offset + x->length);

    key.offset = MIN (key.offset, x->offset);
    key.length = end - key.offset;
    key.time = MAX (key.time, x->time);
    ts_delete (tm, x);
  }
  ts_add (tm, &key);
}

static void
ts_remove (void *m, uint64_t offset, uint64_t length)
{
  struct tmap *tm = m;
  const struct bext key = { offset, length, 0 };
  uint64_t end = offset + length;
  struct bext **found;

  while ((found = tfind (&key, &tm->root, cmp_overlap)) != NULL) {
    struct bext *x = *found;
    uint64_t xend = x->offset + x->length;

    if (x->offset < offset && xend > end) {     /* split */
      const struct bext tail = { end, xend - end, x->time };

      x->length = offset - x->offset;
      ts_add (tm, &tail);
      return;
    }
    if (x->offset < offset)                     /* keep the head */
      x->length = offset - x->offset;
    else if (xend > end) {                      /* keep the tail */
      x->offset = end;
      x->length = xend - end;
    }
    else
      ts_delete (tm, x);
  }
}

static bool
ts_overlap (void *m, uint64_t offset, uint64_t length)
{
  struct tmap *tm = m;
  const struct bext key = { offset, length, 0 };

  return tfind (&key, &tm->root, cmp_overlap) != NULL;
}

struct pick {
  bool by_time;
  const struct bext *best;
};

static void
pick_visit (const void *nodep, VISIT which, void *closure)
{
  struct pick *p = closure;
  const struct bext *x = *(const struct bext * const *) nodep;

  if (which != postorder && which != leaf)    /* in order, once each */
    return;
  if (p->best == NULL ||
      (p->by_time ? x->time < p->best->time : x->length > p->best->length))
    p->best = x;
}

static bool
ts_pick (void *m, bool by_time, struct extent *out)
{
  struct tmap *tm = m;
  struct pick p = { by_time, NULL };

  twalk_r (tm->root, pick_visit, &p);
  if (p.best == NULL)
    return false;
  *out = (struct extent) {
    .offset = p.best->offset, .length = p.best->length, .time = p.best->time,
  };
  return true;
}

static bool
ts_largest (void *m, struct extent *out)
{
  return ts_pick (m, false, out);
}

static bool
ts_oldest (void *m, struct extent *out)
{
  return ts_pick (m, true, out);
}

static size_t
ts_count (void *m)
{
  return ((struct tmap *) m)->count;
}

static size_t
ts_memory (void *m)
{
  return 0;                     /* measured with mallinfo2 instead */
}

static const struct impl tsearch_impl = {
  "tsearch", ts_create, ts_destroy, ts_insert, ts_remove, ts_overlap,
  ts_largest, ts_oldest, ts_count, ts_memory,
};

/* ---- measuring ---- */

static uint64_t rng_state = 1;

static uint64_t
below (uint64_t n)
{
  return splitmix_below (&rng_state, n);
}

static double
clock_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Throughput is timed in the thread's CPU time: this machine is shared,
 * and wall time would count the slices other processes take (under a
 * load average of 5 the churn mix took twice as long by the wall clock).
 * Single-op latencies, too short for that, use the (cheaper, vDSO)
 * monotonic clock.
 */
static double
cpu_ns (void)
{
  return clock_ns (CLOCK_THREAD_CPUTIME_ID);
}

static double
wall_ns (void)
{
  return clock_ns (CLOCK_MONOTONIC);
}

/* Resident set size in bytes. */
static size_t
rss (void)
{
  FILE *fp = fopen ("/proc/self/statm", "r");
  unsigned long size, resident = 0;

  if (fp) {
    if (fscanf (fp, "%lu %lu", &size, &resident) != 2)
      resident = 0;
    fclose (fp);
  }
  return resident * sysconf (_SC_PAGESIZE);
}

/* Bytes malloc has handed out and not had back. */
static size_t
heap_in_use (void)
{
  struct mallinfo2 mi = mallinfo2 ();

  return mi.uordblks + mi.hblkhd;
}

/* The map's memory: its own account if it keeps one, else the growth
 * of the malloc heap since base.
 */
static double
held (const struct impl *im, void *m, size_t heap_base)
{
  size_t own = im->memory (m);

  return own ? own : (double) (heap_in_use () - heap_base);
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return (x > y) - (x < y);
}

static double
median (double *v, int n)
{
  qsort (v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double scale = 1;
static int reps = 3;

static uint64_t
scaled (uint64_t n)
{
  return MAX (UINT64_C (1000), (uint64_t) (n * scale));
}

/* A random permutation of 0..n-1. */
static uint32_t *
shuffled (uint32_t n)
{
  uint32_t *v = malloc (n * sizeof *v);

  if (v == NULL)
    die ("malloc");
  for (uint32_t i = 0; i < n; i++)
    v[i] = i;
  for (uint32_t i = n - 1; i > 0; i--) {
    uint32_t j = below (i + 1), t = v[i];

    v[i] = v[j];
    v[j] = t;
  }
  return v;
}

static void
print_row (const char *what, double em, double ts, const char *unit)
{
  printf ("  %-44s %10.0f %10.0f %7.1fx  %s\n", what, em, ts, ts / em, unit);
}

/* ---- 1. fragmentation ---- */

struct frag_result {
  double remove_ns, insert_ns;  /* per op */
  double before, peak, after;   /* bytes held: one extent, 5M, healed */
  size_t extents, final_count;
};

/* One 40 GiB extent; remove every other 4 KiB block (in address order,
 * or in the order of perm), then insert the holes back.
 */
static struct frag_result
frag_run (const struct impl *im, uint64_t blocks, const uint32_t *perm)
{
  struct frag_result r;
  size_t heap = heap_in_use ();
  void *m = im->create ();
  uint64_t holes = blocks / 2;
  double t0;

  im->insert (m, 0, blocks * 4 * KiB, 1);
  r.before = held (im, m, heap);
  t0 = cpu_ns ();
  for (uint64_t i = 0; i < holes; i++) {
    uint64_t b = 2 * (perm ? perm[i] : i) + 1;

    im->remove (m, b * 4 * KiB, 4 * KiB);
  }
  r.remove_ns = (cpu_ns () - t0) / holes;
  r.extents = im->count (m);
  r.peak = held (im, m, heap);
  t0 = cpu_ns ();
  for (uint64_t i = 0; i < holes; i++) {
    uint64_t b = 2 * (perm ? perm[holes - 1 - i] : i) + 1;

    im->insert (m, b * 4 * KiB, 4 * KiB, 2);
  }
  r.insert_ns = (cpu_ns () - t0) / holes;
  r.final_count = im->count (m);
  r.after = held (im, m, heap);
  im->destroy (m);
  malloc_trim (0);
  return r;
}

static struct frag_result
frag_median (const struct impl *im, int n, uint64_t blocks,
             const uint32_t *perm)
{
  double rem[MAX_REPS], ins[MAX_REPS];
  struct frag_result r = { 0 };

  for (int i = 0; i < n; i++) {
    r = frag_run (im, blocks, perm);
    rem[i] = r.remove_ns;
    ins[i] = r.insert_ns;
  }
  r.remove_ns = median (rem, n);
  r.insert_ns = median (ins, n);
  return r;
}

static void
bench_fragmentation (void)
{
  uint64_t blocks = scaled (40 * GiB / (4 * KiB));
  uint32_t *perm = shuffled (blocks / 2);

  printf ("\n1. Fragmentation: one %.1f GiB extent, every other 4 KiB block "
          "removed,\n   then the holes inserted back (%" PRIu64
          " removes, %" PRIu64 " inserts)\n", blocks * 4.0 / (1 << 20),
          blocks / 2, blocks / 2);
  printf ("  %-44s %10s %10s %8s\n", "", "extmap", "tsearch", "ratio");
  for (int order = 0; order < 2; order++) {
    const uint32_t *p = order ? perm : NULL;
    struct frag_result e = frag_median (&extmap_impl, reps, blocks, p);
    struct frag_result t = frag_median (&tsearch_impl, 1, blocks, p);
    const char *name = order ? "random order" : "address order";
    char what[64];

    snprintf (what, sizeof what, "%s: remove (split)", name);
    print_row (what, e.remove_ns, t.remove_ns, "ns/op");
    snprintf (what, sizeof what, "%s: insert (merge)", name);
    print_row (what, e.insert_ns, t.insert_ns, "ns/op");
    snprintf (what, sizeof what, "%s: memory at %zu extents", name,
              e.extents);
    print_row (what, e.peak / e.extents, t.peak / t.extents, "bytes/extent");
    printf ("  %-44s %10.0f %10.0f           bytes\n",
            "  memory before, one extent", e.before, t.before);
    printf ("  %-44s %10.0f %10.0f           bytes, %zu and %zu extent(s)\n",
            "  memory after healing", e.after, t.after, e.final_count,
            t.final_count);
  }
  free (perm);
}

/* ---- 2. sequential growth ---- */

static double
seq_run (const struct impl *im, uint64_t n, uint64_t stride, double *bytes,
         size_t *count)
{
  size_t heap = heap_in_use ();
  void *m = im->create ();
  double t0 = cpu_ns (), ns;

  for (uint64_t i = 0; i < n; i++)
    im->insert (m, i * stride, 4 * KiB, i);
  ns = (cpu_ns () - t0) / n;
  *count = im->count (m);
  *bytes = held (im, m, heap) / *count;
  im->destroy (m);
  malloc_trim (0);
  return ns;
}

static double
seq_median (const struct impl *im, uint64_t n, uint64_t stride,
            double *bytes, size_t *count)
{
  double v[MAX_REPS];

  for (int i = 0; i < reps; i++)
    v[i] = seq_run (im, n, stride, bytes, count);
  return median (v, reps);
}

static void
bench_sequential (void)
{
  uint64_t n = scaled (5000000);
  double eb, tb, e, t;
  size_t ec, tc;

  printf ("\n2. Sequential growth: %" PRIu64 " ascending 4 KiB extents\n", n);
  printf ("  %-44s %10s %10s %8s\n", "", "extmap", "tsearch", "ratio");
  e = seq_median (&extmap_impl, n, 8 * KiB, &eb, &ec);
  t = seq_median (&tsearch_impl, n, 8 * KiB, &tb, &tc);
  print_row ("with 4 KiB gaps: insert", e, t, "ns/op");
  print_row ("with 4 KiB gaps: memory", eb, tb, "bytes/extent");
  e = seq_median (&extmap_impl, n, 4 * KiB, &eb, &ec);
  t = seq_median (&tsearch_impl, n, 4 * KiB, &tb, &tc);
  print_row ("adjacent: insert (merge)", e, t, "ns/op");
  printf ("  %-44s %10zu %10zu           extent(s) at the end\n",
          "adjacent: count", ec, tc);
}

/* ---- 3. steady churn, latency ---- */

enum op_kind { OP_INSERT, OP_REMOVE, OP_QUERY, OP_PICK };

struct op {
  uint64_t offset, length;
  uint8_t kind;
};

/* The churn mix over an address space with room for n extents of
 * 4-64 KiB: 45% inserts, 45% removes of a range spanning 0-3 extents,
 * 9% overlap queries, 1% picks (largest and oldest in turn).
 */
static struct op *
churn_ops (uint64_t nops, uint64_t space)
{
  struct op *ops = malloc (nops * sizeof *ops);
  uint64_t pages = space / (4 * KiB);

  if (ops == NULL)
    die ("malloc");
  for (uint64_t i = 0; i < nops; i++) {
    unsigned dice = below (100);
    struct op *o = &ops[i];

    o->offset = below (pages) * 4 * KiB;
    o->length = (1 + below (16)) * 4 * KiB;
    if (dice < 45)
      o->kind = OP_INSERT;
    else if (dice < 90) {
      o->kind = OP_REMOVE;
      o->length = (1 + below (40)) * 4 * KiB;
    }
    else if (dice < 99)
      o->kind = OP_QUERY;
    else
      o->kind = OP_PICK;
  }
  return ops;
}

static uint32_t clock_ticks;

/* Run ops; picks only if do_picks (else they are skipped and counted).
 * lat, when given, gets every op's duration.
 */
static double
churn_run (const struct impl *im, void *m, const struct op *ops,
           uint64_t nops, bool do_picks, uint64_t *picks, double *lat)
{
  volatile bool sink = false;
  double t0 = cpu_ns ();
  uint64_t done = 0;

  *picks = 0;
  for (uint64_t i = 0; i < nops; i++) {
    const struct op *o = &ops[i];
    struct extent e;
    double s = lat ? wall_ns () : 0;

    switch (o->kind) {
    case OP_INSERT:
      im->insert (m, o->offset, o->length, ++clock_ticks);
      break;
    case OP_REMOVE:
      im->remove (m, o->offset, o->length);
      break;
    case OP_QUERY:
      sink = im->overlap (m, o->offset, o->length);
      break;
    default:
      (*picks)++;
      if (!do_picks)
        continue;
      sink = (*picks % 2 ? im->largest : im->oldest) (m, &e);
    }
    if (lat)
      lat[done] = wall_ns () - s;
    done++;
  }
  (void) sink;
  return (cpu_ns () - t0) / done;
}

/* Fill m with n random 4-64 KiB extents in space. */
static void
fill_random (const struct impl *im, void *m, uint64_t n, uint64_t space)
{
  uint64_t pages = space / (4 * KiB);

  while (im->count (m) < n)
    im->insert (m, below (pages) * 4 * KiB, (1 + below (16)) * 4 * KiB,
                ++clock_ticks);
}

static double
percentile (double *v, uint64_t n, double p)
{
  qsort (v, n, sizeof *v, cmp_double);
  return v[(uint64_t) (p * (n - 1))];
}

static double
clock_overhead (void)
{
  double v[1001];

  for (int i = 0; i < 1001; i++) {
    double s = wall_ns ();

    v[i] = wall_ns () - s;
  }
  return median (v, 1001);
}

struct churn_result {
  double ns;                    /* per op, median of rounds */
  double pick_ns;               /* per pick (baseline: timed apart) */
  uint64_t picks;               /* picks in one round */
  size_t start, end;            /* extents before and after */
  double lat50, lat99;
};

static struct churn_result
churn (const struct impl *im, uint64_t n, uint64_t nops, bool picks_inline)
{
  uint64_t space = n * 128 * KiB;
  struct churn_result r = { 0 };
  double v[MAX_REPS], *lat;
  struct op *ops;
  void *m = im->create ();
  uint64_t latn = MIN (nops, UINT64_C (300000));
  int rounds = MAX (reps, 1);

  rng_state = 7;                /* the same map and ops for both */
  fill_random (im, m, n, space);
  ops = churn_ops (nops, space);
  r.start = im->count (m);
  for (int i = 0; i < rounds; i++)
    v[i] = churn_run (im, m, ops, nops, picks_inline, &r.picks, NULL);
  r.ns = median (v, rounds);
  r.end = im->count (m);

  /* Picks timed on their own, for the baseline whose full walks would
   * take hours at 1% of the mix.
   */
  if (!picks_inline) {
    double t0 = cpu_ns ();
    struct extent e;

    for (int i = 0; i < 10; i++)
      (i % 2 ? im->oldest : im->largest) (m, &e);
    r.pick_ns = (cpu_ns () - t0) / 10;
  }

  /* Every op of a further run timed alone, picks left out. */
  lat = malloc (latn * sizeof *lat);
  if (lat == NULL)
    die ("malloc");
  {
    uint64_t skipped;
    uint64_t done = 0;

    churn_run (im, m, ops, latn, false, &skipped, lat);
    done = latn - skipped;
    r.lat50 = percentile (lat, done, 0.50);
    r.lat99 = percentile (lat, done, 0.99);
  }
  free (lat);
  free (ops);
  im->destroy (m);
  malloc_trim (0);
  return r;
}

static void
bench_churn (void)
{
  uint64_t n = scaled (5000000), nops = scaled (1000000);
  struct churn_result e = churn (&extmap_impl, n, nops, true);
  struct churn_result t = churn (&tsearch_impl, n, nops, false);
  /* The baseline's full mix: its non-pick ops as measured, plus its
   * picks at their measured cost.
   */
  double t_mix = (t.ns * (nops - t.picks) + t.pick_ns * t.picks) / nops;

  printf ("\n3. Steady churn at %" PRIu64 " extents: %" PRIu64 " ops a round "
          "(45%% insert 4-64 KiB,\n   45%% remove 4-160 KiB spanning 0-3 "
          "extents, 9%% overlap query, 1%% pick largest/oldest)\n", n, nops);
  printf ("   extents: extmap %zu -> %zu, tsearch %zu -> %zu\n",
          e.start, e.end, t.start, t.end);
  printf ("  %-44s %10s %10s %8s\n", "", "extmap", "tsearch", "ratio");
  print_row ("full mix (tsearch picks extrapolated)", e.ns, t_mix, "ns/op");
  printf ("  %-44s %10.0f %10.0f %7.1fx  ns/op\n",
          "mix without the picks (tsearch as run)", e.ns, t.ns, t.ns / e.ns);
  printf ("  %-44s %10s %10.0f           ns/pick (full twalk_r)\n",
          "tsearch pick largest/oldest", "-", t.pick_ns);
  printf ("  %-44s %10.0f %10.0f %7.1fx  ops/s ratio\n",
          "throughput, full mix (ops/s)", 1e9 / e.ns, 1e9 / t_mix,
          t_mix / e.ns);

  printf ("\n4. Latency of single random ops at %" PRIu64 " extents (insert, "
          "remove, query;\n   each timed alone with clock_gettime, whose own "
          "cost is %.0f ns and included)\n", n, clock_overhead ());
  printf ("  %-44s %10s %10s %8s\n", "", "extmap", "tsearch", "ratio");
  print_row ("median", e.lat50, t.lat50, "ns");
  print_row ("p99", e.lat99, t.lat99, "ns");
}

/* ---- 5. memory at 10M random extents ---- */

static void
bench_memory (void)
{
  uint64_t n = scaled (10000000);
  uint64_t space = UINT64_C (1) << 46;
  double em, ts, erss, trss;
  size_t heap, r0;
  void *m;

  printf ("\n5. Memory at %" PRIu64 " random extents (4-64 KiB at random "
          "offsets in 64 TiB)\n", n);
  r0 = rss ();
  m = extmap_impl.create ();
  fill_random (&extmap_impl, m, n, space);
  em = (double) extmap_memory (m) / n;
  erss = (double) (rss () - r0) / n;
  extmap_impl.destroy (m);

  malloc_trim (0);
  heap = heap_in_use ();
  r0 = rss ();
  m = tsearch_impl.create ();
  fill_random (&tsearch_impl, m, n, space);
  ts = (double) (heap_in_use () - heap) / n;
  trss = (double) (rss () - r0) / n;
  tsearch_impl.destroy (m);
  malloc_trim (0);

  printf ("  %-44s %10s %10s %8s\n", "", "extmap", "tsearch", "ratio");
  print_row ("extmap_memory / mallinfo2 growth", em, ts, "bytes/extent");
  print_row ("RSS growth", erss, trss, "bytes/extent");
}

/* The floor under every figure at millions of extents: the latency of
 * a load that depends on the one before, over 256 MiB (a big map's
 * size), on huge pages as the map's big slabs are.  One random cycle
 * through all the cache lines (Sattolo's shuffle).
 */
static void
bench_memory_latency (void)
{
  const size_t bytes = 256 << 20, lines = bytes / 64;
  const unsigned steps = 2000000;
  uint64_t *a = aligned_alloc (2 << 20, bytes);
  volatile uint64_t sink;
  uint64_t at = 0;
  double t0;

  if (a == NULL)
    die ("aligned_alloc");
#ifdef MADV_HUGEPAGE
  madvise (a, bytes, MADV_HUGEPAGE);
#endif
  for (size_t i = 0; i < lines; i++)
    a[i * 8] = i;
  for (size_t i = lines - 1; i > 0; i--) {
    size_t j = below (i), t = a[i * 8];

    a[i * 8] = a[j * 8];
    a[j * 8] = t;
  }
  t0 = cpu_ns ();
  for (unsigned i = 0; i < steps; i++)
    at = a[at * 8];
  sink = at;
  (void) sink;
  printf ("Memory latency (dependent loads over 256 MiB, huge pages "
          "advised): %.0f ns\n", (cpu_ns () - t0) / steps);
  free (a);
}

static void
print_cpu (void)
{
  FILE *fp = fopen ("/proc/cpuinfo", "r");
  char line[256];

  while (fp && fgets (line, sizeof line, fp)) {
    if (strncmp (line, "model name", 10) == 0) {
      char *colon = strchr (line, ':');

      printf ("CPU: %s", colon ? colon + 2 : line);
      break;
    }
  }
  if (fp)
    fclose (fp);
  printf ("CPUs online: %ld\n", sysconf (_SC_NPROCESSORS_ONLN));
}

int
main (int argc, char *argv[])
{
  const char *only = "12345";
  int c;

  while ((c = getopt (argc, argv, "r:s:t:")) != -1) {
    switch (c) {
    case 'r':
      reps = atoi (optarg);
      break;
    case 's':
      scale = atof (optarg);
      break;
    case 't':
      only = optarg;
      break;
    default:
      fprintf (stderr, "usage: %s [-r REPS] [-s SCALE] [-t SCENARIOS]\n",
               argv[0]);
      exit (EXIT_FAILURE);
    }
  }
  if (reps < 1 || reps > MAX_REPS || !(scale > 0)) {
    fprintf (stderr, "%s: -r takes 1 to %d, -s a positive number\n",
             argv[0], MAX_REPS);
    exit (EXIT_FAILURE);
  }

  setvbuf (stdout, NULL, _IOLBF, 0);   /* show progress through a pipe */
  printf ("Extent map microbenchmark (bench-extmap -r %d -s %g)\n", reps,
          scale);
  print_cpu ();
  printf ("extmap: B+tree, 25 extents a 512-byte leaf, 64 KiB then 2 MiB "
          "(huge page) slabs.\n"
          "tsearch: glibc tsearch/tdelete red-black tree, one malloc'd "
          "extent a node;\n  its pick-largest/oldest is a full twalk_r "
          "(what a naive map does).\n"
          "Times: thread CPU time, median of %d runs for extmap; for tsearch "
          "one run,\n  except churn (median of %d rounds) and sequential "
          "growth (%d runs).\n  Latencies (4): wall clock.\n"
          "ratio = tsearch / extmap (above 1: extmap is better).\n",
          reps, reps, reps);
  bench_memory_latency ();

  if (strchr (only, '1'))
    bench_fragmentation ();
  if (strchr (only, '2'))
    bench_sequential ();
  if (strchr (only, '3') || strchr (only, '4'))
    bench_churn ();             /* 4, latency, is measured with 3 */
  if (strchr (only, '5'))
    bench_memory ();
  return 0;
}
