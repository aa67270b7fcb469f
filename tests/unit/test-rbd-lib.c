/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: backend/rbd/rbd-lib.c: the real librados and librbd loaded
 * and every function the backend calls found in them; a library that is
 * not installed refused with ELIBACC and a message saying what to
 * install (a soname that no system has stands for it).
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rbd-lib.h"

#define ABSENT "libdiscardcache-test-absent.so.1"

static void
test_loaded (void **state)
{
  struct rbd_lib lib;
  char why[512] = "";

  memset (&lib, 0, sizeof lib);
  assert_int_equal (rbd_lib_load (&lib, RBD_LIB_RADOS_SONAME,
                                  RBD_LIB_RBD_SONAME, why, sizeof why), 0);
#define CHECK_FOUND(name) assert_non_null (lib.name);
  RBD_LIB_RADOS_FUNCTIONS (CHECK_FOUND)
  RBD_LIB_RBD_FUNCTIONS (CHECK_FOUND)
#undef CHECK_FOUND
  /* Found in the library, not something else of that name. */
  assert_ptr_equal (lib.rbd_open, rbd_lib_get ("rbd:p/i")->rbd_open);
}

/* A failed load says which library, the package and dlerror's text. */
static void
check_missing (const char *rados_so, const char *rbd_so, const char *want)
{
  struct rbd_lib lib;
  char why[512] = "";

  errno = 0;
  assert_int_equal (rbd_lib_load (&lib, rados_so, rbd_so, why, sizeof why),
                    -1);
  assert_int_equal (errno, ELIBACC);
  if (strstr (why, want) == NULL || strstr (why, ABSENT) == NULL)
    fail_msg ("got \"%s\", expected \"%s\" and the soname %s", why, want,
              ABSENT);
}

static void
test_missing_rbd (void **state)
{
  check_missing (RBD_LIB_RADOS_SONAME, ABSENT, "the RBD backend needs "
                 "librbd (Debian: apt-get install librbd1): ");
}

static void
test_missing_rados (void **state)
{
  check_missing (ABSENT, RBD_LIB_RBD_SONAME, "the RBD backend needs "
                 "librados (Debian: apt-get install librados2): ");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_loaded),
    cmocka_unit_test (test_missing_rbd),
    cmocka_unit_test (test_missing_rados),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
