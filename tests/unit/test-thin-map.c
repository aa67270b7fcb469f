/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of thin mode's map of runs (thin-map.c):
 * lookups, joins and cuts, and the checks recovery makes of each record
 * against the free set.
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

/* The map of runs: lookups, joins, cuts. */
static void
test_map_runs (void **state)
{
  struct thin_map m;
  uint64_t n;
  uint32_t p;

  assert_int_equal (thin_map_init (&m, 100, 50), 0);
  assert_false (thin_map_lookup (&m, 0, 100, &p, &n));
  assert_int_equal (n, 100);
  assert_int_equal (thin_map_add (&m, 10, 5, 20), 0);
  assert_int_equal (thin_map_add (&m, 15, 5, 25), 0);   /* joins */
  assert_int_equal (thin_map_runs (&m), 1);
  assert_int_equal (thin_map_add (&m, 20, 1, 40), 0);   /* does not */
  assert_int_equal (thin_map_runs (&m), 2);
  assert_true (thin_map_lookup (&m, 12, 100, &p, &n));
  assert_int_equal (p, 22);
  assert_int_equal (n, 8);
  assert_false (thin_map_lookup (&m, 3, 100, &p, &n));
  assert_int_equal (n, 7);
  /* Overlaps and ranges past either space are refused. */
  assert_int_equal (thin_map_add (&m, 19, 2, 0), -1);
  assert_int_equal (thin_map_add (&m, 99, 2, 0), -1);
  assert_int_equal (thin_map_add (&m, 50, 2, 49), -1);
  assert_int_equal (m.mapped, 11);
  /* A cut in the middle keeps both ends. */
  assert_int_equal (thin_map_remove (&m, 12, 2), 0);
  assert_true (thin_map_lookup (&m, 14, 100, &p, &n));
  assert_int_equal (p, 24);
  assert_int_equal (n, 6);
  assert_int_equal (m.mapped, 9);
  thin_map_free (&m);
}

/* Recovery's checks: a map record takes only free slots, an unmap only
 * a run mapped so.
 */
static void
test_map_replay_checks (void **state)
{
  struct thin_map m;
  struct extmap *free_set;

  assert_int_equal (thin_map_init (&m, 100, 50), 0);
  assert_int_equal (thin_map_add (&m, 0, 10, 5), 0);
  free_set = thin_map_free_set (&m);
  assert_non_null (free_set);
  assert_int_equal (extmap_bytes (free_set), 40);
  assert_int_equal (thin_map_replay_map (&m, free_set, 20, 2, 14), -1);
  assert_int_equal (thin_map_replay_map (&m, free_set, 5, 2, 30), -1);
  assert_int_equal (thin_map_replay_map (&m, free_set, 20, 2, 15), 0);
  assert_int_equal (thin_map_replay_unmap (&m, free_set, 3, 2, 9), -1);
  assert_int_equal (thin_map_replay_unmap (&m, free_set, 3, 2, 8), 0);
  assert_int_equal (thin_map_replay_map (&m, free_set, 50, 2, 8), 0);
  assert_int_equal (extmap_bytes (free_set), 38);
  thin_map_free (&m);
  extmap_free (free_set);
  /* Two runs on one physical slot: no free set. */
  assert_int_equal (thin_map_init (&m, 100, 50), 0);
  assert_int_equal (thin_map_add (&m, 0, 10, 5), 0);
  assert_int_equal (thin_map_add (&m, 20, 10, 14), 0);
  assert_null (thin_map_free_set (&m));
  thin_map_free (&m);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) \
  cmocka_unit_test_setup_teardown (name, thin_setup, thin_teardown)
    T (test_map_runs),
    T (test_map_replay_checks),
#undef T
  };

  return cmocka_run_group_tests_name ("thin-map", tests, NULL, NULL);
}
