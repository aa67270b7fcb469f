/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: differential test of the extent map.
 *
 * Random operations (seeded, reproducible) are applied both to the map
 * and to a reference model that is trivially correct (extmap-ref.c: a
 * sorted array of extents, merged and split by linear scans).  After every operation
 * one query is compared; every few operations the whole content and
 * the tree's own invariants are.  Several address spaces shape the
 * tree differently: bytes, pages, a sparse space spanning all of
 * [0, 2^63), and a space ending exactly at 2^63.
 *
 *   test-extmap-diff [SEED]     (or EXTMAP_DIFF_SEED=SEED)
 * runs every configuration with that seed instead of the built-in ones;
 * EXTMAP_DIFF_SCALE=N multiplies the number of operations, and
 * EXTMAP_DIFF_PARANOID=1 compares everything after every operation.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arith.h"
#include "extmap.h"
#include "extmap-ref.h"
#include "splitmix.h"

/* Settings from the command line and the environment. */
static uint64_t user_seed;
static bool have_user_seed;
static unsigned scale = 1;
static bool paranoid;

/* ---- random numbers (splitmix64: tiny, and the same everywhere) ---- */

static uint64_t rng_state;

static uint64_t
rnd (void)
{
  return splitmix_next (&rng_state);
}

static uint64_t
below (uint64_t n)
{
  return splitmix_below (&rng_state, n);
}

/* ---- the run ---- */

struct config {
  const char *name;
  uint64_t base;                /* byte offset of unit 0 */
  uint64_t unit;                /* bytes per unit */
  uint64_t units;               /* size of the address space in units */
  unsigned maxrun;              /* longest ordinary range, in units */
  uint64_t bigrun;              /* longest rare long range, in units */
  unsigned phase;               /* operations per growing or shrinking phase */
  unsigned grow, shrink;        /* % of inserts in each kind of phase */
  unsigned ops;                 /* operations per seed */
  uint64_t granularity;         /* granule totals kept (0: not) */
  bool runs;                    /* a map of runs (extmap_new_runs) */
};

struct run {
  const struct config *cf;
  uint64_t seed;
  unsigned op;
  const char *what;             /* the operation */
  const char *query;            /* the query after it, if any */
  struct extmap *map;
  struct extmap_ref ref;
  uint32_t now;
};

static const char *program_name = "test-extmap-diff";

#define CHECK(run, cond, ...)                                           \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf (stderr, "FAILED: config %s seed %" PRIu64                \
               " op %u (%s%s%s): ", (run)->cf->name, (run)->seed,       \
               (run)->op, (run)->what, (run)->query ? ", then " : "",   \
               (run)->query ? (run)->query : "");                       \
      fprintf (stderr, __VA_ARGS__);                                    \
      fprintf (stderr, "\n  reproduce with: %s %" PRIu64 "\n",          \
               program_name, (run)->seed);                              \
      fail ();                                                          \
    }                                                                   \
  } while (0)

/* Everything: content in order, counters, and the tree's invariants. */
static void
full_compare (struct run *run)
{
  const char *err = ref_check_all (run->map, &run->ref);

  CHECK (run, err == NULL, "%s", err);
}

/* A byte offset somewhere in (or just around) the address space. */
static uint64_t
pick_offset (struct run *run)
{
  const struct config *cf = run->cf;
  uint64_t off = cf->base + below (cf->units) * cf->unit;

  if (cf->unit > 1 && below (4) == 0)
    off += below (cf->unit);    /* cut inside a unit */
  return off;
}

static uint64_t
pick_length (struct run *run)
{
  const struct config *cf = run->cf;
  uint64_t units;

  if (below (50) == 0)
    units = 1 + below (cf->bigrun);     /* across many extents */
  else
    units = 1 + below (cf->maxrun);
  if (cf->unit > 1 && below (4) == 0)
    return units * cf->unit - below (cf->unit);
  return units * cf->unit;
}

/* Mostly recent times with many ties, sometimes the extremes. */
static uint32_t
pick_time (struct run *run)
{
  switch (below (20)) {
  case 0: return 0;
  case 1: return UINT32_MAX;
  case 2: return rnd ();
  default: return run->now > 40 ? run->now - below (40) : run->now;
  }
}

/* A run's value: mostly one that continues a neighbour in one of a few
 * lanes, so that runs join, sometimes anywhere.
 */
static uint32_t
pick_value (struct run *run, uint64_t off, uint64_t len)
{
  uint64_t v;

  if (below (4) == 0)
    v = below ((UINT64_C (1) << 32) - len + 1);
  else
    v = (off + below (3) * 5000) & 0xffffffff;
  return v + len > (UINT64_C (1) << 32) ? 0 : (uint32_t) v;
}

/* One query, chosen at random, against the reference. */
static void
random_query (struct run *run)
{
  enum ref_query q = below (REF_QUERIES);
  struct ref_query_args a = { .stop_after = 1 + below (40) };
  const char *err;

  switch (q) {
  case REF_LARGEST_ALIGNED_BEFORE:
    a.cutoff = below (3) == 0 ? (uint32_t) rnd () : pick_time (run);
    /* The map's minlen (its fast path), none, or any other. */
    a.minlen = below (2) ? run->ref.minlen : below (2) ? 0 : pick_length (run);
    break;
  case REF_FIND_OVERLAP:
    a.x = below (64) ? pick_offset (run) : UINT64_MAX - below (2);
    a.len = below (8) == 0 ? rnd () : pick_length (run);
    break;
  case REF_FIND_FROM:
    a.x = below (16) ? pick_offset (run) : below (2) ? rnd () : UINT64_MAX;
    break;
  case REF_ITERATE:
    a.x = pick_offset (run);
    break;
  default:
    break;
  }
  run->query = ref_query_names[q];
  err = ref_check_query (run->map, &run->ref, q, &a);
  CHECK (run, err == NULL, "%s", err);
}

/* A range the map must refuse with EINVAL, leaving itself unchanged. */
static void
invalid_op (struct run *run)
{
  uint64_t off, len, removed = 12345;
  size_t count = extmap_count (run->map);
  uint64_t bytes = extmap_bytes (run->map);
  int r;

  switch (below (3)) {
  case 0: off = pick_offset (run); len = 0; break;
  case 1: off = EXTMAP_MAX_END - below (4096); len = 4096 + below (8192); break;
  default: off = UINT64_MAX - below (100); len = 101 + below (1000); break;
  }
  if (ref_valid (off, len))     /* the first case with off at the top */
    return;
  run->what = "invalid";
  errno = 0;
  if (below (2))
    r = extmap_insert (run->map, off, len, pick_time (run));
  else
    r = extmap_remove (run->map, off, len, &removed);
  CHECK (run, r == -1 && errno == EINVAL, "[%" PRIu64 "+%" PRIu64
         "] gave %d, errno %d", off, len, r, errno);
  CHECK (run, extmap_count (run->map) == count &&
         extmap_bytes (run->map) == bytes, "map changed");
}

static void
one_op (struct run *run, unsigned grow_pct)
{
  unsigned dice = below (100);
  uint64_t off, len, removed, want;
  uint32_t t;

  run->now += below (4);
  run->query = NULL;
  if (dice < grow_pct) {
    int want_r, r;

    run->what = "insert";
    off = pick_offset (run);
    len = pick_length (run);
    if (!ref_valid (off, len))
      return;
    t = run->cf->runs ? pick_value (run, off, len) : pick_time (run);
    errno = 0;
    r = extmap_insert (run->map, off, len, t);
    want_r = ref_insert (&run->ref, off, len, t);
    CHECK (run, r == want_r && (r == 0 || errno == EINVAL),
           "insert [%" PRIu64 "+%" PRIu64 "] at %" PRIu32 " gave %d (%m), "
           "reference %d", off, len, t, r, want_r);
  }
  else if (dice < 90) {
    run->what = "remove";
    off = pick_offset (run);
    len = pick_length (run);
    if (!ref_valid (off, len))
      return;
    CHECK (run, extmap_remove (run->map, off, len, &removed) == 0,
           "remove [%" PRIu64 "+%" PRIu64 "] failed: %m", off, len);
    want = ref_remove (&run->ref, off, len);
    CHECK (run, removed == want, "removed %" PRIu64 " bytes, reference %"
           PRIu64, removed, want);
  }
  else if (dice < 97)
    invalid_op (run);
  else if (dice < 98 && !run->cf->runs) {
    uint32_t delta = below (4) == 0 ? (uint32_t) rnd () : below (200);

    run->what = "rebase_time";
    extmap_rebase_time (run->map, delta);
    ref_rebase_time (&run->ref, delta);
    run->now = run->now > delta ? run->now - delta : 0;
  }
  else if (dice < 99 && !run->cf->runs && below (10) == 0) {
    /* A new minlen: every inner node's oldest forwardable time again. */
    run->what = "set_minlen";
    run->ref.minlen = below (3) == 0 ? 0 : pick_length (run);
    extmap_set_minlen (run->map, run->ref.minlen);
  }
  else if (below (1000) == 0) {
    run->what = "clear";
    extmap_clear (run->map);
    ref_clear (&run->ref);
  }
  else
    run->what = "idle";

  CHECK (run, extmap_count (run->map) == run->ref.n,
         "count %zu, reference %zu", extmap_count (run->map), run->ref.n);
  random_query (run);
}

static void
run_seed (const struct config *cf, uint64_t seed, unsigned ops)
{
  struct run run = { .cf = cf, .seed = seed };
  size_t most = 0;

  rng_state = seed;
  run.map = cf->runs ? extmap_new_runs () : extmap_new ();
  assert_non_null (run.map);
  run.ref.runs = cf->runs;
  run.ref.granularity = cf->granularity;
  extmap_set_granularity (run.map, cf->granularity);

  for (run.op = 0; run.op < ops; run.op++) {
    /* Alternate growing and shrinking phases, so the tree passes
     * through every size and both splits and merges dominate in turn.
     */
    unsigned grow = (run.op / cf->phase) % 2 ? cf->shrink : cf->grow;
    unsigned every = paranoid ? 1 : run.ref.n < 200 ? 8
      : run.ref.n < 2000 ? 128 : 1024;

    one_op (&run, grow);
    if (run.op % every == 0)
      full_compare (&run);
    most = MAX (most, run.ref.n);
  }
  full_compare (&run);

  /* Drain it: long removes until little is left, then one remove of
   * everything, after which the map must hold no node at all.
   */
  run.what = "drain";
  while (run.ref.n > 10) {
    const struct extent *x = &run.ref.v[below (run.ref.n)];
    uint64_t off = x->offset + below (x->length);
    uint64_t len = (1 + below (cf->bigrun)) * cf->unit;

    if (!ref_valid (off, len))
      continue;
    CHECK (&run, extmap_remove (run.map, off, len, NULL) == 0, "failed: %m");
    ref_remove (&run.ref, off, len);
    if (run.ref.n < 500 && below (8) == 0)
      full_compare (&run);
  }
  CHECK (&run, extmap_remove (run.map, 0, EXTMAP_MAX_END, NULL) == 0,
         "failed: %m");
  ref_clear (&run.ref);
  full_compare (&run);
  CHECK (&run, extmap_count (run.map) == 0, "not empty");

  print_message ("%s seed %" PRIu64 ": %u operations, up to %zu extents\n",
                 cf->name, seed, ops, most);
  extmap_free (run.map);
  ref_free (&run.ref);
}

/* ---- configurations ---- */


static void
test_config (void **state)
{
  const struct config *cf = *state;
  static const uint64_t seeds[] = { 1, 2, 0x5eed, 20240611 };

  if (have_user_seed)
    run_seed (cf, user_seed, cf->ops * scale);
  else {
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
      run_seed (cf, seeds[i], cf->ops * scale);
  }
}

/* Granule totals are kept in most configurations, with granules of a
 * few units, so that extents cross from sub-granule to aligned and back.
 */
static const struct config configs[] = {
  /* Byte granularity in a small space: every off-by-one shows. */
  { "bytes", 0, 1, 3000, 12, 750, 3000, 65, 35, 60000, 4, false },
  /* 4 KiB pages, dense: mostly merges and splits of a few extents. */
  { "pages", 0, 4096, 1024, 8, 256, 3000, 65, 35, 60000, 16384, false },
  /* The top of the address space: ends reach exactly 2^63. */
  { "top", EXTMAP_MAX_END - (UINT64_C (4096) << 40), UINT64_C (1) << 40,
    4096, 6, 1024, 3000, 65, 35, 40000, UINT64_C (1) << 42, false },
  /* Sparse units of 2^51 bytes over all of [0, 2^63). */
  { "sparse", 0, UINT64_C (1) << 51, 4096, 4, 1024, 3000, 65, 35, 40000,
    0, false },
  /* A wide space, short ranges and long growing phases: ten thousand
   * extents and more, so four levels with the real node sizes.
   */
  { "deep", 1 << 20, 4096, 1 << 20, 2, 64, 12000, 80, 30, 80000, 65536,
    false },
  /* Maps of runs (thin mode's slot map): small and dense, many joins
   * and refused overlaps; then deep.
   */
  { "runs", 0, 1, 3000, 12, 750, 3000, 65, 35, 60000, 0, true },
  { "runs-deep", 0, 1, 1 << 20, 2, 64, 12000, 80, 30, 60000, 8, true },
};

int
main (int argc, char *argv[])
{
  const char *env_seed = getenv ("EXTMAP_DIFF_SEED");
  const char *env_scale = getenv ("EXTMAP_DIFF_SCALE");
  struct CMUnitTest tests[sizeof configs / sizeof configs[0]];

  program_name = argv[0];
  if (argc > 1 || env_seed) {
    user_seed = strtoull (argc > 1 ? argv[1] : env_seed, NULL, 0);
    have_user_seed = true;
  }
  if (env_scale)
    scale = MAX (1, atoi (env_scale));
  paranoid = getenv ("EXTMAP_DIFF_PARANOID") != NULL;

  for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
    tests[i] = (struct CMUnitTest)
      cmocka_unit_test_prestate (test_config, (void *) &configs[i]);
    tests[i].name = configs[i].name;
  }
  return cmocka_run_group_tests (tests, NULL, NULL);
}
