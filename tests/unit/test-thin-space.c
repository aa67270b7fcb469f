/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of thin mode's free space (thin-space.c):
 * best fit among pending runs, sequence numbers renumbered before they
 * wrap, many lone runs.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "le.h"
#include "mem-backend.h"
#include "scratch.h"
#include "splitmix.h"
#include "thin-volume.h"
#include "thin-pure.h"
#include "thin-util.h"
#include "volume.h"

/* Best fit among pending runs: the shortest that holds the request,
 * the most recently freed among equals, else the longest; clean space
 * from its largest run.
 */
static void
test_space_best_fit (void **state)
{
  struct thin_space s;
  struct extent x;

  assert_int_equal (thin_space_init (&s), 0);
  assert_false (thin_space_best_pending (&s, 1, &x));
  thin_space_add_pending (&s, 100, 4);
  thin_space_add_pending (&s, 10, 1);
  thin_space_add_pending (&s, 200, 8);
  thin_space_add_pending (&s, 20, 1);
  thin_space_add_pending (&s, 300, 2);
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 20);            /* length 1, the newer */
  assert_true (thin_space_best_pending (&s, 2, &x));
  assert_int_equal (x.offset, 300);
  assert_true (thin_space_best_pending (&s, 3, &x));
  assert_int_equal (x.offset, 100);
  assert_true (thin_space_best_pending (&s, 5, &x));
  assert_int_equal (x.offset, 200);
  assert_true (thin_space_best_pending (&s, 9, &x));
  assert_int_equal (x.offset, 200);           /* none fits: the longest */
  assert_int_equal (x.length, 8);
  /* Taking an end keeps the rest in its place. */
  assert_int_equal (thin_space_take (&s, 20, 1), 0);
  assert_int_equal (thin_space_take (&s, 100, 3), 0);
  /* 103 is left of a run freed before 10: it keeps its place. */
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 10);
  assert_int_equal (thin_space_take (&s, 10, 1), 0);
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 103);
  /* Freeing next to a run joins it, and makes it the newest. */
  thin_space_add_pending (&s, 104, 2);
  assert_true (thin_space_best_pending (&s, 3, &x));
  assert_int_equal (x.offset, 103);
  assert_int_equal (x.length, 3);
  assert_true (thin_space_best_pending (&s, 2, &x));
  assert_int_equal (x.offset, 300);
  thin_space_add_pending (&s, 302, 1);
  assert_true (thin_space_best_pending (&s, 3, &x));
  assert_int_equal (x.offset, 300);
  /* A slot taken must be an end of one free run. */
  assert_int_equal (thin_space_take (&s, 40, 1), -1);
  assert_int_equal (thin_space_take (&s, 300, 4), -1);
  /* Clean space and what reads as zeros. */
  thin_space_add_clean (&s, 1000, 10, true);
  thin_space_add_clean (&s, 2000, 50, false);
  thin_space_learn_zero (&s, 2040, 100);
  assert_int_equal (thin_space_largest_clean (&s, 40, &x), THIN_CLEAN);
  assert_int_equal (x.offset, 2000);
  assert_int_equal (thin_space_largest_clean (&s, 10, &x), THIN_ZERO);
  assert_int_equal (x.offset, 1000);            /* zero, and holds 10 */
  assert_true (thin_space_is_zero (&s, 1000, 10));
  assert_true (thin_space_is_zero (&s, 2045, 5));
  assert_false (thin_space_is_zero (&s, 2039, 2));
  assert_int_equal (thin_space_take (&s, 1000, 2), 0);
  assert_false (thin_space_is_zero (&s, 1000, 1));
  assert_true (thin_space_is_zero (&s, 1002, 1));
  assert_int_equal (thin_space_find (&s, 200, &x), THIN_PENDING);
  assert_int_equal (thin_space_find (&s, 2001, &x), THIN_CLEAN);
  assert_int_equal (thin_space_find (&s, 2045, &x), THIN_ZERO);
  assert_int_equal (thin_space_find (&s, 1001, &x), THIN_NOT_FREE);
  assert_int_equal (thin_space_slots (&s), 3 + 8 + 3 + 8 + 50);
  thin_space_free (&s);
}

/* Sequence numbers renumbered before they wrap keep the order. */
static void
test_space_renumber (void **state)
{
  struct thin_space s;
  struct extent x;

  assert_int_equal (thin_space_init (&s), 0);
  s.pending.seq_limit = 10;
  for (uint64_t i = 0; i < 40; i++)
    thin_space_add_pending (&s, i * 10, 1 + i % 3);
  /* The newest run of each length. */
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 390);
  assert_true (thin_space_best_pending (&s, 3, &x));
  assert_int_equal (x.offset, 380);
  assert_true (thin_space_oldest_pending (&s, &x));
  assert_int_equal (x.offset, 0);
  thin_space_free (&s);
}

/* 100k lone pending slots: every pick is the newest, and taking them
 * all one by one is fast (each pick is a search, not a walk).
 */
static void
test_space_many_runs (void **state)
{
  const uint64_t runs = 100000;
  struct thin_space s;
  struct extent x;

  assert_int_equal (thin_space_init (&s), 0);
  for (uint64_t i = 0; i < runs; i++)
    thin_space_add_pending (&s, i * 2, 1);
  thin_space_add_pending (&s, 3 * runs, 5);
  for (uint64_t i = runs; i-- > 0; ) {
    assert_true (thin_space_best_pending (&s, 1, &x));
    assert_int_equal (x.offset, i * 2);
    assert_int_equal (thin_space_take (&s, x.offset, 1), 0);
  }
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 3 * runs);
  thin_space_free (&s);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) \
  cmocka_unit_test_setup_teardown (name, thin_setup, thin_teardown)
    T (test_space_best_fit),
    T (test_space_renumber),
    T (test_space_many_runs),
#undef T
  };

  return cmocka_run_group_tests_name ("thin-space", tests, NULL, NULL);
}
