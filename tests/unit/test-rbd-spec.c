/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: backend/rbd/rbd-spec.c: rbd:POOL/[NAMESPACE/]IMAGE[@SNAP]
 * split into its parts, and every malformed form refused with EINVAL.
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rbd-internal.h"

static void
check (const char *spec, const char *pool, const char *ns, const char *image,
       const char *snap)
{
  struct rbd_spec sp;

  assert_int_equal (rbd_spec_parse (spec, &sp), 0);
  assert_string_equal (sp.pool, pool);
  assert_string_equal (sp.nspace, ns);
  assert_string_equal (sp.image, image);
  if (snap)
    assert_string_equal (sp.snap, snap);
  else
    assert_null (sp.snap);
  rbd_spec_free (&sp);
}

static void
test_forms (void **state)
{
  check ("rbd:rbd/disk", "rbd", "", "disk", NULL);
  check ("rbd:pool/ns/disk", "pool", "ns", "disk", NULL);
  check ("rbd:pool/disk@snap1", "pool", "", "disk", "snap1");
  check ("rbd:pool/ns/disk@s", "pool", "ns", "disk", "s");
}

static void
test_refused (void **state)
{
  static const char *const bad[] = {
    "rbd:", "rbd:disk", "rbd:/disk", "rbd:pool/", "rbd:pool//disk",
    "rbd:a/b/c/d", "rbd:pool/disk@", "rbd:pool/disk@a@b", "rbd:pool/ns/@s",
  };

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct rbd_spec sp;

    errno = 0;
    assert_int_equal (rbd_spec_parse (bad[i], &sp), -1);
    assert_int_equal (errno, EINVAL);
  }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_forms),
    cmocka_unit_test (test_refused),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
