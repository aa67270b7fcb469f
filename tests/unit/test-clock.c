/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: common/clock.h's deadlines and the condition variables
 * they are for.  A monotonic deadline on a condition left at the
 * default clock (CLOCK_REALTIME) is decades in the past, so the timed
 * wait returns at once: the bug nbd-plugin/stop.c's quiet check had.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "clock.h"

#define WAIT_MS 200

/* How long a timed wait for a deadline WAIT_MS away took, in ms. */
static uint64_t
waited_ms (pthread_cond_t *cond)
{
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  struct timespec until = deadline_after_ms (WAIT_MS);
  uint64_t start = monotonic_ms ();
  int r;

  pthread_mutex_lock (&m);
  do
    r = pthread_cond_timedwait (cond, &m, &until);
  while (r == 0);               /* a spurious wake-up */
  pthread_mutex_unlock (&m);
  assert_int_equal (r, ETIMEDOUT);
  return monotonic_ms () - start;
}

static void
test_monotonic_cond_waits (void **state)
{
  pthread_cond_t cond;

  assert_int_equal (monotonic_cond_init (&cond), 0);
  assert_true (waited_ms (&cond) >= WAIT_MS);
  pthread_cond_destroy (&cond);
}

/* The control: the same deadline on a default condition does not wait,
 * so the test above fails where the clock is not set.
 */
static void
test_default_cond_does_not_wait (void **state)
{
  pthread_cond_t cond;

  assert_int_equal (pthread_cond_init (&cond, NULL), 0);
  assert_true (waited_ms (&cond) < WAIT_MS);
  pthread_cond_destroy (&cond);
}

static void
test_deadline_carries (void **state)
{
  struct timespec now, d;

  clock_gettime (CLOCK_MONOTONIC, &now);
  d = deadline_after_ms (1999);
  assert_true (d.tv_nsec >= 0 && d.tv_nsec < 1000000000);
  assert_true (d.tv_sec >= now.tv_sec + 1 && d.tv_sec <= now.tv_sec + 3);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_monotonic_cond_waits),
    cmocka_unit_test (test_default_cond_does_not_wait),
    cmocka_unit_test (test_deadline_carries),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
