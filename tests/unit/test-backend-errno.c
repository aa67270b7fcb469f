/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: the one errno mapping of every backend
 * (backend_errno in backend/backend.h, and the backend_* data
 * operations that return it).
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "backend.h"
#include "internal.h"

static void
test_mapping (void **state)
{
  static const int kept[] = {
    EIO, EPERM, EROFS, ENOMEM, EINVAL, EOVERFLOW, ENOTSUP, EOPNOTSUPP,
  };
  static const int to_eio[] = {
    ETIMEDOUT, ESHUTDOWN, ENOTCONN, ECONNRESET, ECONNREFUSED, EHOSTUNREACH,
    EPIPE, EAGAIN, EBUSY, ENXIO, ESTALE, ECANCELED, 0, 9999,
  };

  (void) state;
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
    assert_int_equal (backend_errno (kept[i]), kept[i]);
  for (size_t i = 0; i < sizeof to_eio / sizeof to_eio[0]; i++)
    assert_int_equal (backend_errno (to_eio[i]), EIO);
  assert_int_equal (backend_errno (ENOSPC), ENOSPC);
  assert_int_equal (backend_errno (EDQUOT), ENOSPC);
  assert_int_equal (backend_errno (EFBIG), ENOSPC);
}

/* A store whose every data operation fails with the errno it is given. */
struct failing {
  struct backend b;
  int err;
  int calls;
};

static int
fail_with (struct backend *b)
{
  struct failing *f = (struct failing *) b;

  f->calls++;
  errno = f->err;
  return -1;
}

static int
f_pread (struct backend *b, void *buf, uint32_t n, uint64_t o)
{
  (void) buf; (void) n; (void) o;
  return fail_with (b);
}

static int
f_pwrite (struct backend *b, const void *buf, uint32_t n, uint64_t o, bool fua)
{
  (void) buf; (void) n; (void) o; (void) fua;
  return fail_with (b);
}

static int
f_zero (struct backend *b, uint64_t o, uint64_t n, bool may_trim, bool fua)
{
  (void) o; (void) n; (void) may_trim; (void) fua;
  return fail_with (b);
}

static int
f_discard (struct backend *b, uint64_t o, uint64_t n, bool fua)
{
  (void) o; (void) n; (void) fua;
  return fail_with (b);
}

static int
f_flush (struct backend *b)
{
  return fail_with (b);
}

static void
f_close (struct backend *b)
{
  (void) b;
}

static const struct backend_ops failing_ops = {
  .kind = "test", .pread = f_pread, .pwrite = f_pwrite, .zero = f_zero,
  .discard = f_discard, .flush = f_flush, .close = f_close,
};

/* Every data operation of backend.h goes through the mapping, each
 * reaching the implementation once. */
static void
test_wrapped_ops (void **state)
{
  struct failing f = { .b.ops = &failing_ops };
  struct backend *b = &f.b;
  char buf[512];

  (void) state;
  f.err = ETIMEDOUT;
  assert_int_equal (backend_pread (b, buf, sizeof buf, 0), -1);
  assert_int_equal (errno, EIO);
  f.err = EDQUOT;
  assert_int_equal (backend_pwrite (b, buf, sizeof buf, 0, false), -1);
  assert_int_equal (errno, ENOSPC);
  f.err = ESHUTDOWN;
  assert_int_equal (backend_zero (b, 0, 512, true, false), -1);
  assert_int_equal (errno, EIO);
  f.err = EOPNOTSUPP;           /* turns forwarding off: must stay */
  assert_int_equal (backend_discard (b, 0, 512, false), -1);
  assert_int_equal (errno, EOPNOTSUPP);
  f.err = ENOTCONN;
  assert_int_equal (backend_flush (b), -1);
  assert_int_equal (errno, EIO);
  assert_int_equal (f.calls, 5);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_mapping),
    cmocka_unit_test (test_wrapped_ops),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
