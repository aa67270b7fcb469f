/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: common/arith.h: MIN and MAX evaluate each argument
 * once and keep its type; the rounding helpers are right on powers of
 * two and refuse anything else.
 */
#include <config.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "arith.h"

static void
test_min_max_evaluate_once (void **state)
{
  int a = 1, b = 5;

  assert_int_equal (MIN (a++, b++), 1);
  assert_int_equal (a, 2);
  assert_int_equal (b, 6);
  assert_int_equal (MAX (a++, b++), 6);
  assert_int_equal (a, 3);
  assert_int_equal (b, 7);
  /* Nested uses do not shadow each other (-Wshadow is an error). */
  assert_int_equal (MIN (MAX (a, b), MIN (10, 20)), 7);
}

static void
test_min_max_keep_width (void **state)
{
  uint64_t big = UINT64_C (1) << 40;

  assert_true (MIN (big, big + 1) == big);
  assert_true (MAX (big, UINT64_C (3)) == big);
  assert_int_equal (sizeof (MIN (big, UINT64_C (3))), 8);
  assert_true (MIN (-1.5, 2.0) == -1.5);
}

static void
test_rounding (void **state)
{
  assert_int_equal (round_down (4097, 4096), 4096);
  assert_int_equal (round_up (4097, 4096), 8192);
  assert_int_equal (round_up (8192, 4096), 8192);
  assert_int_equal (round_up (0, 512), 0);
  assert_true (round_up ((UINT64_C (1) << 63) - 1, UINT64_C (1) << 62) ==
               UINT64_C (1) << 63);
  assert_true (is_aligned (65536, 4096));
  assert_false (is_aligned (65536 + 512, 4096));
  assert_true (is_power_of_2 (1));
  assert_false (is_power_of_2 (0));
  assert_false (is_power_of_2 (3 * 4096));
}

/* Run fn in a child: it must die of the assertion (SIGABRT). */
static void
assert_aborts (void (*fn) (void))
{
  pid_t pid = fork ();
  int status;

  assert_true (pid >= 0);
  if (pid == 0) {
    /* No core file, and no assertion message mixed into the output. */
    close (STDERR_FILENO);
    fn ();
    _exit (0);
  }
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFSIGNALED (status));
  assert_int_equal (WTERMSIG (status), SIGABRT);
}

static volatile uint64_t sink;

static void round_up_by_3 (void) { sink = round_up (10, 3); }
static void round_down_by_0 (void) { sink = round_down (10, 0); }
static void aligned_to_6 (void) { sink = is_aligned (12, 6); }

static void
test_rounding_refuses_other_alignments (void **state)
{
  assert_aborts (round_up_by_3);
  assert_aborts (round_down_by_0);
  assert_aborts (aligned_to_6);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_min_max_evaluate_once),
    cmocka_unit_test (test_min_max_keep_width),
    cmocka_unit_test (test_rounding),
    cmocka_unit_test (test_rounding_refuses_other_alignments),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
