/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: the nbd backend against nbdkit.
 * Usage: test-backend-nbd MODE URI, run by tests/e2e/test-backend-nbd.sh,
 * which starts the server that MODE expects:
 *   rw      nbdkit memory 64M (multi-conn, trim, zero, fua, flush)
 *   ro      nbdkit -r memory 64M
 *   notrim  nbdkit --filter=nozero eval ... (no trim, zero, fua, flush
 *           nor multi-conn)
 *   sizes   nbdkit --filter=blocksize-policy --filter=delay memory 64M
 *           (min 512, preferred 64K, max 1M enforced, trims take 1 s)
 */
#include <config.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "backend.h"
#include "internal.h"
#include "test-backend-util.h"

#define MiB (1024 * 1024)
#define SIZE (64 * MiB)

static void
assert_identity (struct backend *b)
{
  assert_int_equal (b->size, SIZE);
  assert_string_equal (b->identity.kind, "nbd");
  assert_string_equal (b->identity.name, backend_spec);
  assert_true (b->identity.dev == 0 && b->identity.ino == 0);
  check_limits_sane (b);
  assert_false (b->limits.discard_zeroes);
  assert_false (b->limits.zero_unmaps);
  /* nbdkit always offers base:allocation. */
  assert_true (b->limits.can_extents);
}

static void
test_open_errors (void **state)
{
  assert_null (backend_open ("nbd+unix:///?socket=/nonexistent/sock", false));
  assert_int_equal (errno, ENOENT);
}

/* rw */

static void
test_rw_limits (void **state)
{
  struct backend *b = *state;
  const struct backend_limits *l = &b->limits;

  assert_identity (b);
  assert_false (l->read_only);
  assert_true (l->can_discard);
  assert_true (l->can_zero);
  assert_true (l->can_fua);
  assert_true (l->can_flush);
  assert_true (l->can_multi_conn);
  assert_int_equal (l->discard_granularity, 4096);
  assert_int_equal (l->max_discard, 1024 * MiB);
  assert_int_equal (l->min_block, 0);
}

static void
test_rw_io (void **state)
{
  struct backend *b = *state;

  write_pattern (b, 0, 4 * MiB, false);
  write_pattern (b, 40 * MiB + 7, 33 * MiB / 2, true);  /* > 1 chunk */
  assert_pattern (b, 0, 4 * MiB);
  assert_pattern (b, 40 * MiB + 7, 33 * MiB / 2);
  /* The script finds this trim, with FUA, in nbdkit's log. */
  assert_int_equal (backend_discard (b, MiB, MiB, true), 0);
  assert_zeroes (b, MiB, MiB);   /* the memory plugin's trim zeroes */
  assert_pattern (b, 2 * MiB, 2 * MiB);
  assert_int_equal (backend_zero (b, 2 * MiB + 1, 4096, false, false), 0);
  assert_zeroes (b, 2 * MiB + 1, 4096);
  assert_pattern (b, 2 * MiB + 4097, MiB);
  assert_int_equal (backend_flush (b), 0);
  /* The whole device at once, as mkfs does. */
  assert_int_equal (backend_discard (b, 0, SIZE, false), 0);
  assert_zeroes (b, 0, MiB);
}

/* Block status: what thin mode asks at start to know which slots read
 * as zeros.  The memory plugin reports what was never written as a
 * hole; a request beyond one answer is asked again where it ended.
 */
struct seen {
  uint64_t end, data, holes;
};

static int
see_extent (uint64_t offset, uint64_t length, uint32_t type, void *opaque)
{
  struct seen *s = opaque;

  assert_int_equal (offset, s->end);
  s->end = offset + length;
  if (type == (BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO))
    s->holes += length;
  else if (type == 0)
    s->data += length;
  return 0;
}

static void
test_rw_extents (void **state)
{
  struct backend *b = *state;
  struct seen s = { .end = 8 * MiB };

  assert_int_equal (backend_discard (b, 0, SIZE, false), 0);
  write_pattern (b, 9 * MiB, MiB, false);
  assert_int_equal (backend_extents (b, 8 * MiB, 4 * MiB, see_extent, &s), 0);
  assert_int_equal (s.end, 12 * MiB);
  assert_int_equal (s.data, MiB);
  assert_int_equal (s.holes, 3 * MiB);
  s = (struct seen) { .end = 0 };
  assert_int_equal (backend_extents (b, 0, SIZE, see_extent, &s), 0);
  assert_int_equal (s.end, SIZE);
  assert_int_equal (s.data, MiB);
}

/* Before backend_start (nbdkit's get_ready, before it forks) there is
 * no reader thread: each request drives its connection itself.  Then
 * the readers take over the same connections.
 */
static void
test_rw_before_start (void **state)
{
  struct backend *b = backend_open (backend_spec, false);

  assert_non_null (b);
  write_pattern (b, 5 * MiB, MiB, false);
  assert_pattern (b, 5 * MiB, MiB);
  assert_int_equal (backend_flush (b), 0);
  assert_int_equal (backend_start (b), 0);
  assert_pattern (b, 5 * MiB, MiB);
  write_pattern (b, 7 * MiB, MiB, true);
  assert_pattern (b, 7 * MiB, MiB);
  backend_close (b);
}

static void
test_rw_range_errors (void **state)
{
  check_range_errors (*state);
}

/* ro */

static void
test_ro (void **state)
{
  struct backend *b = backend_open (backend_spec, false);

  /* A read-only server is reported, even when writing was asked. */
  assert_non_null (b);
  assert_identity (b);
  check_read_only (b);
  backend_close (b);
}

/* notrim */

static void
test_notrim (void **state)
{
  struct backend *b = *state;
  const struct backend_limits *l = &b->limits;

  assert_identity (b);
  assert_false (l->read_only);
  assert_false (l->can_discard);
  assert_false (l->can_zero);
  assert_false (l->can_fua);
  assert_false (l->can_flush);
  assert_false (l->can_multi_conn);
  /* Silently refused: the engine turns forwarding off. */
  assert_fails_with (backend_discard (b, 0, 4096, false), EOPNOTSUPP);
  write_pattern (b, 0, 1 * MiB, true);
  /* No zero on the server: zeroes are written. */
  assert_int_equal (backend_zero (b, 4096, 300 * 1024 + 5, true, true), 0);
  assert_pattern (b, 0, 4096);
  assert_zeroes (b, 4096, 300 * 1024 + 5);
  assert_pattern (b, 4096 + 300 * 1024 + 5, 4096);
  assert_int_equal (backend_flush (b), 0);
}

/* sizes */

static void
test_sizes_limits (void **state)
{
  struct backend *b = *state;
  const struct backend_limits *l = &b->limits;

  assert_identity (b);
  assert_int_equal (l->min_block, 512);
  assert_int_equal (l->pref_block, 64 * 1024);
  assert_int_equal (l->max_block, MiB);
  assert_int_equal (l->discard_granularity, 64 * 1024);
  assert_int_equal (l->max_discard, 1024 * MiB);
}

/* The server refuses requests over 1M: larger ones must be cut. */
static void
test_sizes_chunks (void **state)
{
  struct backend *b = *state;

  write_pattern (b, 512, 3 * MiB + 512, false);
  assert_pattern (b, 512, 3 * MiB + 512);
  assert_int_equal (backend_zero (b, 1024, 2 * MiB, false, false), 0);
  assert_zeroes (b, 1024, 2 * MiB);
}

/* Discards are cut inward to the 64K granularity: the server refuses
 * requests that are not aligned to its 512-byte minimum.
 */
static void
test_sizes_discard_cut (void **state)
{
  struct backend *b = *state;

  write_pattern (b, 0, 256 * 1024, false);
  assert_int_equal (backend_discard (b, 1000, 60 * 1024, false), 0);
  assert_int_equal (backend_discard (b, 1000, 200 * 1024, false), 0);
  assert_pattern (b, 0, 64 * 1024);
  assert_zeroes (b, 64 * 1024, 128 * 1024);
  assert_pattern (b, 192 * 1024, 64 * 1024);
}

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *
slow_trim (void *arg)
{
  struct backend *b = arg;

  return (void *) (intptr_t) backend_discard (b, 0, 64 * 1024, false);
}

/* A 1 s trim must not hold up reads: they are in flight beside it (and
 * on another connection, for a server that serves one connection's
 * requests in order).
 */
static void
test_sizes_concurrency (void **state)
{
  struct backend *b = *state;
  pthread_t thread;
  void *ret;
  double start, t;
  char buf[4096];
  int i;

  assert_true (b->limits.can_multi_conn);
  start = now ();
  assert_int_equal (pthread_create (&thread, NULL, slow_trim, b), 0);
  for (i = 0; i < 10; ++i)
    assert_int_equal (backend_pread (b, buf, sizeof buf, MiB), 0);
  t = now () - start;
  assert_int_equal (pthread_join (thread, &ret), 0);
  assert_int_equal ((intptr_t) ret, 0);
  fprintf (stderr, "reads beside a 1 s trim took %.3f s, trim %.3f s\n",
           t, now () - start);
  assert_true (t < 0.5);
  assert_true (now () - start >= 0.9);
}

int
main (int argc, char *argv[])
{
  const struct CMUnitTest rw[] = {
    cmocka_unit_test (test_open_errors),
    backend_unit_test (test_rw_limits),
    backend_unit_test (test_rw_io),
    backend_unit_test (test_rw_extents),
    cmocka_unit_test (test_rw_before_start),
    backend_unit_test (test_rw_range_errors),
  };
  const struct CMUnitTest ro[] = {
    cmocka_unit_test (test_ro),
  };
  const struct CMUnitTest notrim[] = {
    backend_unit_test (test_notrim),
  };
  const struct CMUnitTest sizes[] = {
    backend_unit_test (test_sizes_limits),
    backend_unit_test (test_sizes_chunks),
    backend_unit_test (test_sizes_discard_cut),
    backend_unit_test (test_sizes_concurrency),
  };

  if (argc != 3) {
    fprintf (stderr, "usage: %s rw|ro|notrim|sizes URI\n", argv[0]);
    return 2;
  }
  backend_spec = argv[2];
  if (strcmp (argv[1], "rw") == 0)
    return cmocka_run_group_tests_name ("rw", rw, NULL, NULL);
  if (strcmp (argv[1], "ro") == 0)
    return cmocka_run_group_tests_name ("ro", ro, NULL, NULL);
  if (strcmp (argv[1], "notrim") == 0)
    return cmocka_run_group_tests_name ("notrim", notrim, NULL, NULL);
  if (strcmp (argv[1], "sizes") == 0)
    return cmocka_run_group_tests_name ("sizes", sizes, NULL, NULL);
  fprintf (stderr, "%s: unknown mode %s\n", argv[0], argv[1]);
  return 2;
}
