/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of the extent map, one edge at a time.
 * (test-extmap-diff.c checks random sequences against a model.)
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
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "arith.h"
#include "extmap.h"

/* Defined in extmap/extmap.c for the tests; not part of extmap.h. */
extern const char *extmap_check (const struct extmap *map);

#define KiB UINT64_C (1024)
#define MiB (KiB * KiB)
#define GiB (MiB * KiB)
#define TOP EXTMAP_MAX_END

/* Compare the whole map with want[0..n), and the tree's invariants. */
struct expect {
  const struct extent *want;
  size_t n, seen;
};

static int
expect_visit (const struct extent *e, void *opaque)
{
  struct expect *x = opaque;

  assert_true (x->seen < x->n);
  assert_int_equal (e->offset, x->want[x->seen].offset);
  assert_int_equal (e->length, x->want[x->seen].length);
  assert_int_equal (e->time, x->want[x->seen].time);
  x->seen++;
  return 0;
}

static void
assert_map (const struct extmap *map, const struct extent *want, size_t n)
{
  struct expect x = { want, n, 0 };
  const char *err = extmap_check (map);
  uint64_t bytes = 0;

  if (err)
    fail_msg ("invariant: %s", err);
  assert_int_equal (extmap_iterate (map, 0, expect_visit, &x), 0);
  assert_int_equal (x.seen, n);
  assert_int_equal (extmap_count (map), n);
  for (size_t i = 0; i < n; i++)
    bytes += want[i].length;
  assert_int_equal (extmap_bytes (map), bytes);
}

#define ASSERT_MAP(map, ...)                                            \
  do {                                                                  \
    static const struct extent want_[] = { __VA_ARGS__ };               \
    assert_map ((map), want_, sizeof want_ / sizeof want_[0]);          \
  } while (0)

static void
assert_extent (const struct extent *e, uint64_t offset, uint64_t length,
               uint32_t time)
{
  assert_int_equal (e->offset, offset);
  assert_int_equal (e->length, length);
  assert_int_equal (e->time, time);
}

static int
setup (void **state)
{
  *state = extmap_new ();
  return *state ? 0 : -1;
}

static int
teardown (void **state)
{
  const char *err = extmap_check (*state);

  if (err)
    fail_msg ("invariant at teardown: %s", err);
  extmap_free (*state);
  return 0;
}

static void
insert_ok (struct extmap *map, uint64_t offset, uint64_t length, uint32_t t)
{
  assert_int_equal (extmap_insert (map, offset, length, t), 0);
}

static uint64_t
remove_ok (struct extmap *map, uint64_t offset, uint64_t length)
{
  uint64_t removed = UINT64_MAX;

  assert_int_equal (extmap_remove (map, offset, length, &removed), 0);
  return removed;
}

static void
insert_einval (struct extmap *map, uint64_t offset, uint64_t length)
{
  errno = 0;
  assert_int_equal (extmap_insert (map, offset, length, 1), -1);
  assert_int_equal (errno, EINVAL);
}

static void
remove_einval (struct extmap *map, uint64_t offset, uint64_t length)
{
  uint64_t removed = 7;

  errno = 0;
  assert_int_equal (extmap_remove (map, offset, length, &removed), -1);
  assert_int_equal (errno, EINVAL);
}

/* The flusher's pick with every extent eligible (a granule of one
 * byte, no minlen): the longest extent whose time is at most cutoff.
 */
static bool
largest_before (struct extmap *map, uint32_t cutoff, struct extent *e)
{
  extmap_set_granularity (map, 1);
  return extmap_largest_aligned_before (map, cutoff, 0, e);
}

/* splitmix64, for reproducible random patterns. */
static uint64_t
rnd (uint64_t *state)
{
  uint64_t z = (*state += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* ---- construction and the empty map ---- */

static void
test_empty (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  extmap_free (NULL);
  assert_int_equal (extmap_count (map), 0);
  assert_int_equal (extmap_bytes (map), 0);
  assert_false (extmap_largest (map, &e));
  assert_false (extmap_oldest (map, &e));
  assert_false (largest_before (map, UINT32_MAX, &e));
  assert_false (extmap_find_from (map, 0, &e));
  assert_false (extmap_find_overlap (map, 0, TOP, &e));
  assert_int_equal (extmap_iterate (map, 0, expect_visit, NULL), 0);
  assert_int_equal (remove_ok (map, 0, TOP), 0);
  extmap_rebase_time (map, 5);
  extmap_clear (map);
  ASSERT_MAP (map);
}

/* ---- insert: merging ---- */

/* Insert the extents of a case in order (ending at a zero length) and
 * compare the map with what it wants.
 */
struct insert_case {
  const char *name;
  struct extent insert[6];
  struct extent want[5];
};

static const struct insert_case insert_cases[] = {
  { "disjoint, any order",
    { { 100, 10, { 1 } }, { 300, 10, { 3 } }, { 200, 10, { 2 } }, { 0, 10, { 0 } } },
    { { 0, 10, { 0 } }, { 100, 10, { 1 } }, { 200, 10, { 2 } }, { 300, 10, { 3 } } } },
  { "touching on the left: starts where the other ends",
    { { 100, 10, { 5 } }, { 110, 10, { 3 } } },
    { { 100, 20, { 5 } } } },
  { "touching on the right: ends where the other starts",
    { { 100, 10, { 3 } }, { 90, 10, { 5 } } },
    { { 90, 20, { 5 } } } },
  { "touching both: fills the hole exactly",
    { { 100, 10, { 1 } }, { 120, 10, { 9 } }, { 110, 10, { 4 } } },
    { { 100, 30, { 9 } } } },
  { "one byte apart: no merge",
    { { 100, 10, { 1 } }, { 111, 10, { 1 } } },
    { { 100, 10, { 1 } }, { 111, 10, { 1 } } } },
  { "the missing byte",
    { { 100, 10, { 1 } }, { 111, 10, { 1 } }, { 110, 1, { 2 } } },
    { { 100, 21, { 2 } } } },
  { "overlapping the tail",
    { { 100, 50, { 1 } }, { 140, 20, { 2 } } },
    { { 100, 60, { 2 } } } },
  { "overlapping the head, older",
    { { 100, 50, { 2 } }, { 90, 20, { 0 } } },
    { { 90, 60, { 2 } } } },
  { "contained, newer: the time is renewed",
    { { 100, 100, { 1 } }, { 120, 10, { 7 } } },
    { { 100, 100, { 7 } } } },
  { "identical, older",
    { { 100, 100, { 7 } }, { 100, 100, { 3 } } },
    { { 100, 100, { 7 } } } },
  { "containing three, not the fourth",
    { { 100, 10, { 8 } }, { 120, 10, { 2 } }, { 140, 10, { 3 } }, { 300, 10, { 9 } },
      { 50, 200, { 1 } } },
    { { 50, 200, { 8 } }, { 300, 10, { 9 } } } },
  { "the newest time of all parts",
    { { 0, 10, { 100 } }, { 20, 10, { UINT32_MAX } }, { 40, 10, { 0 } }, { 5, 40, { 50 } } },
    { { 0, 50, { UINT32_MAX } } } },
  { "at offset 0",
    { { 0, 1, { 1 } }, { 1, 9, { 2 } } },
    { { 0, 10, { 2 } } } },
};

static void
test_insert_cases (void **state)
{
  for (size_t c = 0; c < sizeof insert_cases / sizeof insert_cases[0]; c++) {
    const struct insert_case *ic = &insert_cases[c];
    struct extmap *map = extmap_new ();
    size_t n = 0;

    assert_non_null (map);
    print_message ("%s\n", ic->name);
    for (size_t i = 0; i < 6 && ic->insert[i].length; i++)
      insert_ok (map, ic->insert[i].offset, ic->insert[i].length,
                 ic->insert[i].time);
    while (n < 5 && ic->want[n].length)
      n++;
    assert_map (map, ic->want, n);
    extmap_free (map);
  }
}

static void
test_merge_many (void **state)
{
  struct extmap *map = *state;
  const unsigned n = 20000;

  for (unsigned i = 0; i < n; i++)
    insert_ok (map, i * 8 * KiB, 4 * KiB, i % 1000);
  assert_int_equal (extmap_count (map), n);
  insert_ok (map, 2 * KiB, (n - 1) * 8 * KiB, 3);
  ASSERT_MAP (map, { 0, (n - 1) * 8 * KiB + 4 * KiB, { 999 } });
}

static void
test_offset_zero (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  insert_ok (map, 0, 1, 1);
  assert_true (extmap_find_from (map, 0, &e));
  assert_extent (&e, 0, 1, 1);
  assert_true (extmap_find_overlap (map, 0, 1, &e));
  insert_ok (map, 1, 9, 2);
  ASSERT_MAP (map, { 0, 10, { 2 } });
  assert_int_equal (remove_ok (map, 0, 1), 1);
  ASSERT_MAP (map, { 1, 9, { 2 } });
}

/* ---- ranges the map refuses ---- */

static void
test_top_of_range (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  insert_ok (map, TOP - 4096, 4096, 1);         /* ends exactly at 2^63 */
  insert_ok (map, TOP - 1, 1, 2);
  insert_einval (map, TOP - 4096, 4097);        /* one past */
  insert_einval (map, TOP, 1);
  remove_einval (map, TOP - 1, 2);
  ASSERT_MAP (map, { TOP - 4096, 4096, { 2 } });
  assert_true (extmap_find_from (map, TOP - 1, &e));
  assert_false (extmap_find_from (map, TOP, &e));
  assert_true (extmap_find_overlap (map, TOP - 1, UINT64_MAX, &e));
  assert_int_equal (remove_ok (map, TOP - 2048, 2048), 2048);
  ASSERT_MAP (map, { TOP - 4096, 2048, { 2 } });
  insert_ok (map, 0, TOP, 0);                   /* everything */
  ASSERT_MAP (map, { 0, TOP, { 2 } });
  assert_int_equal (remove_ok (map, 0, TOP), TOP);
  ASSERT_MAP (map);
}

static void
test_overflow (void **state)
{
  struct extmap *map = *state;

  insert_ok (map, 4096, 4096, 1);
  insert_einval (map, UINT64_MAX, 2);           /* wraps to 1 */
  insert_einval (map, UINT64_MAX - 4095, 8192);
  insert_einval (map, 4096, UINT64_MAX);
  remove_einval (map, UINT64_MAX, 2);
  remove_einval (map, 1, UINT64_MAX);
  ASSERT_MAP (map, { 4096, 4096, { 1 } });
}

static void
test_zero_length (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  insert_ok (map, 4096, 4096, 1);
  insert_einval (map, 5000, 0);
  insert_einval (map, 0, 0);
  remove_einval (map, 5000, 0);
  assert_false (extmap_find_overlap (map, 5000, 0, &e));
  ASSERT_MAP (map, { 4096, 4096, { 1 } });
}

/* ---- remove ---- */

static void
test_remove_split (void **state)
{
  struct extmap *map = *state;

  insert_ok (map, 0, 100, 7);
  assert_int_equal (remove_ok (map, 40, 20), 20);
  ASSERT_MAP (map, { 0, 40, { 7 } }, { 60, 40, { 7 } });
  assert_int_equal (remove_ok (map, 41, 1), 0);  /* in the hole */
  assert_int_equal (remove_ok (map, 39, 22), 2); /* a byte off each */
  ASSERT_MAP (map, { 0, 39, { 7 } }, { 61, 39, { 7 } });
}

static void
test_remove_edges (void **state)
{
  struct extmap *map = *state;

  insert_ok (map, 100, 100, 1);
  assert_int_equal (remove_ok (map, 50, 60), 10);        /* the head */
  assert_int_equal (remove_ok (map, 190, 60), 10);       /* the tail */
  ASSERT_MAP (map, { 110, 80, { 1 } });
  assert_int_equal (remove_ok (map, 100, 10), 0);        /* just before */
  assert_int_equal (remove_ok (map, 190, 10), 0);        /* just after */
  assert_int_equal (remove_ok (map, 110, 80), 80);       /* exactly */
  ASSERT_MAP (map);
}

static void
test_remove_spanning (void **state)
{
  struct extmap *map = *state;
  const unsigned n = 5000;
  struct extent e;

  for (unsigned i = 0; i < n; i++)
    insert_ok (map, i * 100, 50, i);
  /* From the middle of extent 10 to the middle of extent 4000. */
  assert_int_equal (remove_ok (map, 1025, 4000 * 100 + 25 - 1025),
                    25 + (4000 - 11) * 50 + 25);
  assert_int_equal (extmap_count (map), n - 3989);
  assert_true (extmap_find_from (map, 950, &e));
  assert_extent (&e, 1000, 25, 10);
  assert_true (extmap_find_from (map, 1025, &e));
  assert_extent (&e, 400025, 25, 4000);
  assert_int_equal (extmap_check (map), NULL);
}

static void
test_remove_all_and_reuse (void **state)
{
  struct extmap *map = *state;
  uint64_t s = 1, bytes;

  for (unsigned i = 0; i < 10000; i++)
    insert_ok (map, (rnd (&s) % (1 << 20)) * 4096, 4096, i);
  bytes = extmap_bytes (map);
  assert_int_equal (remove_ok (map, 0, TOP), bytes);
  ASSERT_MAP (map);
  insert_ok (map, 8192, 4096, 1);
  ASSERT_MAP (map, { 8192, 4096, { 1 } });
}

/* ---- queries ---- */

static void
test_largest (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  insert_ok (map, 1000, 30, 5);
  insert_ok (map, 2000, 50, 9);
  insert_ok (map, 3000, 50, 1);         /* ties with 2000: lower wins */
  insert_ok (map, 4000, 10, 0);
  assert_true (extmap_largest (map, &e));
  assert_extent (&e, 2000, 50, 9);
  remove_ok (map, 2000, 1);
  assert_true (extmap_largest (map, &e));
  assert_extent (&e, 3000, 50, 1);
  insert_ok (map, 1030, 100, 2);        /* grows 1000 to 130 */
  assert_true (extmap_largest (map, &e));
  assert_extent (&e, 1000, 130, 5);
}

static void
test_oldest (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  insert_ok (map, 1000, 30, 5);
  insert_ok (map, 2000, 50, 3);
  insert_ok (map, 3000, 50, 3);         /* ties with 2000: lower wins */
  insert_ok (map, 4000, 10, 4);
  assert_true (extmap_oldest (map, &e));
  assert_extent (&e, 2000, 50, 3);
  insert_ok (map, 2050, 1, 6);          /* merging makes it newer */
  assert_true (extmap_oldest (map, &e));
  assert_extent (&e, 3000, 50, 3);
  remove_ok (map, 3000, 50);
  assert_true (extmap_oldest (map, &e));
  assert_extent (&e, 4000, 10, 4);
}

static void
test_largest_before (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  insert_ok (map, 1000, 100, 50);
  insert_ok (map, 2000, 80, 10);
  insert_ok (map, 3000, 80, 20);
  insert_ok (map, 4000, 60, 5);
  assert_false (largest_before (map, 4, &e));
  assert_true (largest_before (map, 5, &e));      /* <= cutoff */
  assert_extent (&e, 4000, 60, 5);
  assert_true (largest_before (map, 20, &e));     /* tie: lower */
  assert_extent (&e, 2000, 80, 10);
  assert_true (largest_before (map, 49, &e));
  assert_extent (&e, 2000, 80, 10);
  assert_true (largest_before (map, 50, &e));
  assert_extent (&e, 1000, 100, 50);
  assert_true (largest_before (map, UINT32_MAX, &e));
  assert_extent (&e, 1000, 100, 50);
}

/* largest_before across many leaves: the bound must not skip the
 * answer when the longest extents are all too new.
 */
static void
test_largest_before_many (void **state)
{
  struct extmap *map = *state;
  struct extent e;
  const unsigned n = 30000;

  for (unsigned i = 0; i < n; i++)
    insert_ok (map, (uint64_t) i * 1000, 1 + i % 500, i % 2 ? 1000 : i);
  /* Odd-numbered extents are all new (time 1000); the best old one is
   * the longest even-numbered one with i <= 999: i = 498 and i = 998
   * both have length 499, and the lower offset wins.
   */
  assert_true (largest_before (map, 999, &e));
  assert_extent (&e, 498000, 499, 498);
  assert_true (largest_before (map, 0, &e));
  assert_extent (&e, 0, 1, 0);
  assert_true (extmap_largest (map, &e));
  assert_extent (&e, 499000, 500, 1000);
  assert_true (extmap_oldest (map, &e));
  assert_extent (&e, 0, 1, 0);
}

static void
test_find_overlap (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  insert_ok (map, 100, 10, 1);
  insert_ok (map, 200, 10, 2);
  insert_ok (map, 300, 10, 3);
  assert_false (extmap_find_overlap (map, 110, 90, &e));  /* touching */
  assert_false (extmap_find_overlap (map, 0, 100, &e));
  assert_true (extmap_find_overlap (map, 0, 101, &e));
  assert_extent (&e, 100, 10, 1);
  assert_true (extmap_find_overlap (map, 109, 1000, &e)); /* first one */
  assert_extent (&e, 100, 10, 1);
  assert_true (extmap_find_overlap (map, 150, 1000, &e));
  assert_extent (&e, 200, 10, 2);
  assert_true (extmap_find_overlap (map, 205, 1, &e));    /* inside */
  assert_extent (&e, 200, 10, 2);
  assert_true (extmap_find_overlap (map, 250, UINT64_MAX, &e));
  assert_extent (&e, 300, 10, 3);
  assert_false (extmap_find_overlap (map, 310, UINT64_MAX, &e));
}

static void
test_find_from (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  for (unsigned i = 0; i < 1000; i++)
    insert_ok (map, i * 100, 10, i);
  assert_true (extmap_find_from (map, 0, &e));
  assert_extent (&e, 0, 10, 0);
  assert_true (extmap_find_from (map, 9, &e));
  assert_extent (&e, 0, 10, 0);
  assert_true (extmap_find_from (map, 10, &e));   /* its end: the next */
  assert_extent (&e, 100, 10, 1);
  assert_true (extmap_find_from (map, 55555, &e));
  assert_extent (&e, 55600, 10, 556);
  assert_true (extmap_find_from (map, 99909, &e));
  assert_extent (&e, 99900, 10, 999);
  assert_false (extmap_find_from (map, 99910, &e));
  assert_false (extmap_find_from (map, TOP, &e));
  assert_false (extmap_find_from (map, UINT64_MAX, &e));
  assert_false (extmap_find_overlap (map, UINT64_MAX, 1, &e));
}

struct collect {
  uint64_t offsets[64];
  size_t n, stop_after;
};

static int
collect_visit (const struct extent *e, void *opaque)
{
  struct collect *c = opaque;

  c->offsets[c->n++] = e->offset;
  return c->n == c->stop_after ? -7 : 0;
}

static void
test_iterate (void **state)
{
  struct extmap *map = *state;
  struct collect c = { .stop_after = 5 };

  for (unsigned i = 0; i < 1000; i++)
    insert_ok (map, i * 100, 10, i);
  /* From inside extent 500, stopping after five: crosses leaves. */
  assert_int_equal (extmap_iterate (map, 50005, collect_visit, &c), -7);
  assert_int_equal (c.n, 5);
  for (size_t i = 0; i < 5; i++)
    assert_int_equal (c.offsets[i], 50000 + i * 100);

  /* To the end, without stopping. */
  c = (struct collect) { .stop_after = SIZE_MAX };
  assert_int_equal (extmap_iterate (map, 99700, collect_visit, &c), 0);
  assert_int_equal (c.n, 3);
  assert_int_equal (c.offsets[2], 99900);

  c = (struct collect) { .stop_after = SIZE_MAX };
  assert_int_equal (extmap_iterate (map, 99910, collect_visit, &c), 0);
  assert_int_equal (c.n, 0);
}

static void
test_count_bytes (void **state)
{
  struct extmap *map = *state;

  insert_ok (map, 0, 10, 0);
  insert_ok (map, 20, 10, 0);
  assert_int_equal (extmap_count (map), 2);
  assert_int_equal (extmap_bytes (map), 20);
  insert_ok (map, 5, 20, 0);
  assert_int_equal (extmap_count (map), 1);
  assert_int_equal (extmap_bytes (map), 30);
  remove_ok (map, 10, 10);
  assert_int_equal (extmap_count (map), 2);
  assert_int_equal (extmap_bytes (map), 20);
}

/* ---- clear, time, memory ---- */

static void
test_clear (void **state)
{
  struct extmap *map = *state;
  size_t empty = extmap_memory (map);

  for (unsigned i = 0; i < 50000; i++)
    insert_ok (map, i * 3, 1, i);
  assert_true (extmap_memory (map) > empty);
  extmap_clear (map);
  ASSERT_MAP (map);
  assert_int_equal (extmap_memory (map), empty);
  insert_ok (map, 7, 1, 1);
  ASSERT_MAP (map, { 7, 1, { 1 } });
}

static void
test_rebase_time (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  insert_ok (map, 0, 10, 5);
  insert_ok (map, 100, 20, 100);
  insert_ok (map, 200, 30, UINT32_MAX);
  extmap_rebase_time (map, 50);
  ASSERT_MAP (map, { 0, 10, { 0 } }, { 100, 20, { 50 } },
              { 200, 30, { UINT32_MAX - 50 } });
  assert_true (extmap_oldest (map, &e));
  assert_extent (&e, 0, 10, 0);
  assert_true (largest_before (map, 50, &e));
  assert_extent (&e, 100, 20, 50);
  extmap_rebase_time (map, UINT32_MAX);
  ASSERT_MAP (map, { 0, 10, { 0 } }, { 100, 20, { 0 } }, { 200, 30, { 0 } });
  assert_true (largest_before (map, 0, &e));
  assert_extent (&e, 200, 30, 0);
}

/* Many leaves' worth, then rebase: every inner node's oldest time
 * must follow (the invariant check recomputes them).
 */
static void
test_rebase_time_many (void **state)
{
  struct extmap *map = *state;
  struct extent e;

  for (unsigned i = 0; i < 20000; i++)
    insert_ok (map, i * 10, 5, 1000 + (i * 7919) % 20000);
  extmap_rebase_time (map, 1500);
  assert_null (extmap_check (map));
  assert_true (extmap_oldest (map, &e));
  assert_int_equal (e.time, 0);
  assert_int_equal (e.offset, 0);
}

/* Splitting one huge extent into many, then healing it: the map ends
 * as one extent and gives its memory back.
 */
static void
test_memory_fragmentation (void **state)
{
  struct extmap *map = *state;
  const uint64_t blocks = 200000;
  size_t one, most;

  insert_ok (map, 0, blocks * 4 * KiB, 1);
  one = extmap_memory (map);
  for (uint64_t b = 1; b < blocks; b += 2)
    assert_int_equal (remove_ok (map, b * 4 * KiB, 4 * KiB), 4 * KiB);
  assert_int_equal (extmap_count (map), blocks / 2);
  assert_null (extmap_check (map));
  most = extmap_memory (map);
  for (uint64_t b = 1; b < blocks; b += 2)
    insert_ok (map, b * 4 * KiB, 4 * KiB, 2);
  ASSERT_MAP (map, { 0, blocks * 4 * KiB, { 2 } });
  print_message ("memory: one extent %zu, %" PRIu64 " extents %zu, "
                 "healed %zu bytes\n", one, blocks / 2, most,
                 extmap_memory (map));
  /* At most one spare slab more than a fresh one-extent map. */
  assert_true (extmap_memory (map) <= 2 * one);
  assert_true (extmap_memory (map) < most / 10);
}

/* Empty slabs below live ones are unmapped, leaving holes in the slab
 * table that the next growth fills.  Ascending inserts fill the slabs in
 * order; removing the first 90% of the extents empties the nodes of all
 * but the first slab and the last ones (a leaf emptied merges with its
 * right neighbour, which is the one freed).
 */
static void
test_slab_reuse (void **state)
{
  struct extmap *map = *state;
#ifdef EXTMAP_SMALL_NODES
  const uint64_t n = 300000;
#else
  const uint64_t n = 1000000;   /* enough 2 MiB slabs that some empty */
#endif
  const uint64_t gone = n / 10 * 9;
  size_t full, sparse;

  for (uint64_t i = 0; i < n; i++)
    insert_ok (map, i * 2, 1, 1);
  full = extmap_memory (map);
  assert_int_equal (remove_ok (map, 0, gone * 2), gone);
  sparse = extmap_memory (map);
  print_message ("memory: %zu, after removing 90%%: %zu bytes\n",
                 full, sparse);
  assert_true (sparse < full / 4);
  assert_null (extmap_check (map));
  for (uint64_t i = 0; i < gone; i++)
    insert_ok (map, i * 2, 1, 2);
  assert_int_equal (extmap_count (map), n);
  assert_null (extmap_check (map));
  assert_true (extmap_memory (map) <= full * 3 / 2);
}

/* Memory per extent for ascending and random inserts, everything
 * counted: at a million extents a partly used 2 MiB slab is still a
 * few percent.  The small-node build maps a page for each slab of
 * eight tiny nodes, so there the figures mean nothing.
 */
static void
test_memory_density (void **state)
{
  struct extmap *map = *state;
  const unsigned n = 1000000;
  uint64_t s = 42;
  double ascending, random;

  for (unsigned i = 0; i < n; i++)
    insert_ok (map, i * 8 * KiB, 4 * KiB, i);
  ascending = (double) extmap_memory (map) / extmap_count (map);
  extmap_clear (map);
  while (extmap_count (map) < n)
    insert_ok (map, (rnd (&s) % (UINT64_C (1) << 36)) * 4 * KiB,
               4 * KiB, 0);
  random = (double) extmap_memory (map) / extmap_count (map);
  print_message ("bytes per extent: ascending %.1f, random %.1f\n",
                 ascending, random);
#ifndef EXTMAP_SMALL_NODES
  assert_true (ascending <= 24);
  assert_true (random <= 28);
#endif
}

/* ---- running out of memory ---- */

#if defined __SANITIZE_ADDRESS__ || defined __SANITIZE_THREAD__
#define HAVE_SHADOW_MEMORY 1
#elif defined __has_feature
#if __has_feature (address_sanitizer) || __has_feature (thread_sanitizer)
#define HAVE_SHADOW_MEMORY 1
#endif
#endif

/* Bytes of address space in use now (VmSize). */
static rlim_t
address_space (void)
{
  FILE *fp = fopen ("/proc/self/statm", "r");
  unsigned long pages = 0;

  if (fp == NULL)
    return 0;
  if (fscanf (fp, "%lu", &pages) != 1)
    pages = 0;
  fclose (fp);
  return (rlim_t) pages * sysconf (_SC_PAGESIZE);
}

/* Use the stack now, so it need not grow while the limit is low. */
static void __attribute__ ((noinline))
touch_stack (void)
{
  volatile char buf[256 * 1024];

  memset ((char *) buf, 1, sizeof buf);
}

struct snapshot {
  struct extent *v;
  size_t n;
};

static int
snapshot_visit (const struct extent *e, void *opaque)
{
  struct snapshot *s = opaque;

  s->v[s->n++] = *e;
  return 0;
}

/* With the address space capped (RLIMIT_AS), inserts and splitting
 * removes run until the pool cannot grow: that one must fail with
 * ENOMEM and leave the map exactly as it was.  Merging and removing
 * whole extents need no memory, and must still work then.
 */
static void
test_enomem (void **state)
{
  struct extmap *map = *state;
  struct snapshot before = { NULL, 0 };
  struct rlimit saved, low;
  bool insert_failed = false, remove_failed = false;
  uint64_t next = 0, removed = 0;
  int r = 0, err = 0, merge_r, remove_r;

#ifdef HAVE_SHADOW_MEMORY
  skip ();                      /* the sanitizer needs its address space */
#endif
  /* Allocated after the skip, which returns through longjmp. */
  before.v = malloc (200000 * sizeof (struct extent));
  assert_non_null (before.v);
  for (unsigned i = 0; i < 1000; i++)
    insert_ok (map, (next += 2) * 4096, 4096, i);
  assert_int_equal (getrlimit (RLIMIT_AS, &saved), 0);
  touch_stack ();

  low = saved;
  low.rlim_cur = address_space ();
  assert_int_equal (setrlimit (RLIMIT_AS, &low), 0);
  for (unsigned i = 0; i < 100000 && !insert_failed; i++) {
    before.n = 0;
    extmap_iterate (map, 0, snapshot_visit, &before);
    r = extmap_insert (map, (next += 2) * 4096, 4096, 1);
    err = errno;
    insert_failed = r == -1;
  }
  for (unsigned i = 0; i < 100000 && !remove_failed && insert_failed; i++) {
    before.n = 0;
    extmap_iterate (map, 0, snapshot_visit, &before);
    /* Split the extent at i: it grows the map by one. */
    r = extmap_remove (map, before.v[i % before.n].offset + 1, 1, NULL);
    err = errno;
    remove_failed = r == -1;
  }
  merge_r = extmap_insert (map, before.v[0].offset + before.v[0].length,
                           1, 9);
  remove_r = extmap_remove (map, before.v[2].offset, before.v[2].length,
                            &removed);
  setrlimit (RLIMIT_AS, &saved);

  assert_true (insert_failed);
  assert_true (remove_failed);
  assert_int_equal (err, ENOMEM);
  assert_int_equal (merge_r, 0);
  assert_int_equal (remove_r, 0);
  assert_int_equal (removed, before.v[2].length);
  before.v[0].length++;
  before.v[0].time = 9;
  memmove (&before.v[2], &before.v[3], (before.n - 3) * sizeof *before.v);
  before.n--;
  assert_map (map, before.v, before.n);
  insert_ok (map, (next += 2) * 4096, 4096, 1);
  free (before.v);
}

/* A map of runs: joins only where values continue, refuses overlaps,
 * and a cut moves the value of what is left after it.
 */
static void
test_runs (void **state)
{
  struct extmap *runs = extmap_new_runs ();

  assert_non_null (runs);
  assert_int_equal (extmap_insert (runs, 0, 4, 100), 0);
  assert_int_equal (extmap_insert (runs, 4, 2, 104), 0);   /* continues */
  assert_int_equal (extmap_insert (runs, 6, 2, 200), 0);   /* touches only */
  ASSERT_MAP (runs, { 0, 6, { 100 } }, { 6, 2, { 200 } });
  errno = 0;
  assert_int_equal (extmap_insert (runs, 7, 4, 300), -1); /* overlaps */
  assert_int_equal (errno, EINVAL);
  assert_int_equal (extmap_insert (runs, 20, 2, UINT32_MAX), -1);
  assert_int_equal (extmap_insert (runs, 20, 2, UINT32_MAX - 1), 0);
  assert_int_equal (extmap_remove (runs, 1, 2, NULL), 0);  /* split */
  ASSERT_MAP (runs, { 0, 1, { 100 } }, { 3, 3, { 103 } }, { 6, 2, { 200 } },
              { 20, 2, { UINT32_MAX - 1 } });
  assert_int_equal (extmap_remove (runs, 5, 2, NULL), 0);  /* two ends */
  ASSERT_MAP (runs, { 0, 1, { 100 } }, { 3, 2, { 103 } }, { 7, 1, { 201 } },
              { 20, 2, { UINT32_MAX - 1 } });
  /* Filling the hole joins left and right when both continue. */
  assert_int_equal (extmap_insert (runs, 1, 2, 101), 0);
  ASSERT_MAP (runs, { 0, 5, { 100 } }, { 7, 1, { 201 } }, { 20, 2, { UINT32_MAX - 1 } });
  assert_int_equal (extmap_insert (runs, 5, 2, 105), 0);   /* left only */
  assert_int_equal (extmap_insert (runs, 19, 1, UINT32_MAX - 2), 0);
  ASSERT_MAP (runs, { 0, 7, { 100 } }, { 7, 1, { 201 } }, { 19, 3, { UINT32_MAX - 2 } });
  extmap_free (runs);
}

/* The granule totals: aligned parts (rounded inward) and the bytes of
 * extents holding no whole granule, through merges, splits and clear.
 */
static void
test_granule_totals (void **state)
{
  struct extmap *map = *state;

  assert_int_equal (extmap_insert (map, 100, 50, 0), 0);
  extmap_set_granularity (map, 64);
  assert_int_equal (extmap_aligned_bytes (map), 0);
  assert_int_equal (extmap_subgranule_bytes (map), 50);
  /* Merged into [100, 250), which holds [128, 192). */
  assert_int_equal (extmap_insert (map, 150, 100, 0), 0);
  assert_int_equal (extmap_aligned_bytes (map), 64);
  assert_int_equal (extmap_subgranule_bytes (map), 0);
  /* Split into [100, 130) and [190, 250): neither holds a granule. */
  assert_int_equal (extmap_remove (map, 130, 60, NULL), 0);
  assert_int_equal (extmap_aligned_bytes (map), 0);
  assert_int_equal (extmap_subgranule_bytes (map), 90);
  /* [190, 320) holds [192, 320). */
  assert_int_equal (extmap_insert (map, 250, 70, 0), 0);
  assert_int_equal (extmap_aligned_bytes (map), 128);
  assert_int_equal (extmap_subgranule_bytes (map), 30);
  extmap_clear (map);
  assert_int_equal (extmap_aligned_bytes (map), 0);
  assert_int_equal (extmap_subgranule_bytes (map), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown (name, setup, teardown)
    T (test_empty),
    T (test_insert_cases),
    T (test_merge_many),
    T (test_offset_zero),
    T (test_top_of_range),
    T (test_overflow),
    T (test_zero_length),
    T (test_remove_split),
    T (test_remove_edges),
    T (test_remove_spanning),
    T (test_remove_all_and_reuse),
    T (test_largest),
    T (test_oldest),
    T (test_largest_before),
    T (test_largest_before_many),
    T (test_find_overlap),
    T (test_find_from),
    T (test_iterate),
    T (test_count_bytes),
    T (test_clear),
    T (test_rebase_time),
    T (test_rebase_time_many),
    T (test_memory_fragmentation),
    T (test_slab_reuse),
    T (test_memory_density),
    T (test_enomem),
    T (test_runs),
    T (test_granule_totals),
#undef T
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
