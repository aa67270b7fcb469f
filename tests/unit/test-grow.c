/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: grow_array (common/grow.h). */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "grow.h"

static void
test_doubles_and_keeps_contents (void **state)
{
  uint32_t *a = NULL, *p;
  size_t cap = 0, n = 0;

  for (uint32_t i = 0; i < 1000; i++) {
    if (n == cap) {
      size_t old = cap;

      p = grow_array (a, &cap, sizeof *a, 8);
      assert_non_null (p);
      assert_int_equal (cap, old ? old * 2 : 8);
      a = p;
    }
    a[n++] = i;
  }
  assert_int_equal (cap, 1024);
  for (uint32_t i = 0; i < 1000; i++)
    assert_int_equal (a[i], i);
  free (a);
}

/* A size that overflows fails cleanly: NULL, ENOMEM, nothing changed. */
static void
test_overflow_changes_nothing (void **state)
{
  unsigned char *a = malloc (16);
  size_t cap = SIZE_MAX / 2 + 1;

  assert_non_null (a);
  a[0] = 42;
  errno = 0;
  assert_null (grow_array (a, &cap, 1, 8));
  assert_int_equal (errno, ENOMEM);
  assert_int_equal (cap, SIZE_MAX / 2 + 1);
  cap = 0;
  errno = 0;
  assert_null (grow_array (a, &cap, SIZE_MAX / 4, 8));
  assert_int_equal (errno, ENOMEM);
  assert_int_equal (cap, 0);
  assert_int_equal (a[0], 42);
  free (a);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_doubles_and_keeps_contents),
    cmocka_unit_test (test_overflow_changes_nothing),
  };

  return cmocka_run_group_tests_name ("grow", tests, NULL, NULL);
}
