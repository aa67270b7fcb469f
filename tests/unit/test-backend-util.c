/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: checks shared by the backend test programs. */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "arith.h"
#include "test-backend-util.h"

const char *backend_spec;

int
backend_setup (void **state)
{
  struct backend *b = backend_open (backend_spec, false);

  if (b == NULL)
    return -1;
  if (backend_start (b) == -1) {
    backend_close (b);
    return -1;
  }
  *state = b;
  return 0;
}

int
backend_teardown (void **state)
{
  backend_close (*state);
  return 0;
}

static void
fill_pattern (unsigned char *buf, uint32_t len, uint64_t offset)
{
  uint32_t i;

  for (i = 0; i < len; ++i) {
    uint64_t p = offset + i;
    buf[i] = (p * 7 + (p >> 12) * 13 + 1) & 0xff;
    if (buf[i] == 0)
      buf[i] = 0x5a;            /* never zero: zeroes must mean zeroed */
  }
}

void
write_pattern (struct backend *b, uint64_t offset, uint32_t len, bool fua)
{
  unsigned char *buf = malloc (len);

  assert_non_null (buf);
  fill_pattern (buf, len, offset);
  assert_int_equal (backend_pwrite (b, buf, len, offset, fua), 0);
  free (buf);
}

/* Reading [offset, offset+len) gives want. */
static void
assert_reads (struct backend *b, uint64_t offset, uint32_t len,
              const unsigned char *want)
{
  unsigned char *got = malloc (len);

  assert_non_null (got);
  memset (got, 0xaa, len);
  assert_int_equal (backend_pread (b, got, len, offset), 0);
  assert_memory_equal (got, want, len);
  free (got);
}

void
assert_pattern (struct backend *b, uint64_t offset, uint32_t len)
{
  unsigned char *want = malloc (len);

  assert_non_null (want);
  fill_pattern (want, len, offset);
  assert_reads (b, offset, len, want);
  free (want);
}

void
assert_zeroes (struct backend *b, uint64_t offset, uint32_t len)
{
  unsigned char *want = calloc (1, len);

  assert_non_null (want);
  assert_reads (b, offset, len, want);
  free (want);
}

void
check_range_errors (struct backend *b)
{
  char buf[512];
  uint64_t end = b->size;

  /* Past the end: reads and discards EINVAL, writes and zeroes ENOSPC. */
  assert_fails_with (backend_pread (b, buf, sizeof buf, end - 256), EINVAL);
  assert_fails_with (backend_pwrite (b, buf, sizeof buf, end, false), ENOSPC);
  assert_fails_with (backend_zero (b, end - 4096, 8192, false, false), ENOSPC);
  assert_fails_with (backend_discard (b, end, 4096, false), EINVAL);
  /* offset + length wraps: EINVAL everywhere. */
  assert_fails_with (backend_pread (b, buf, sizeof buf, UINT64_MAX - 100),
                     EINVAL);
  assert_fails_with (backend_pwrite (b, buf, sizeof buf, UINT64_MAX, false),
                     EINVAL);
  assert_fails_with (backend_zero (b, 4096, UINT64_MAX, true, false), EINVAL);
  assert_fails_with (backend_discard (b, UINT64_MAX - 4095, 8192, false),
                     EINVAL);
  /* The last byte and empty requests at the end are fine. */
  assert_int_equal (backend_pread (b, buf, 1, end - 1), 0);
  assert_int_equal (backend_pread (b, buf, 0, end), 0);
}

void
check_read_only (struct backend *b)
{
  char buf[4096] = { 0 };

  assert_true (b->limits.read_only);
  assert_false (b->limits.can_discard);
  assert_false (b->limits.can_zero);
  assert_int_equal (backend_pread (b, buf, sizeof buf, 0), 0);
  assert_fails_with (backend_pwrite (b, buf, sizeof buf, 0, false), EROFS);
  assert_fails_with (backend_zero (b, 0, 4096, true, false), EROFS);
  assert_fails_with (backend_discard (b, 0, 4096, false), EROFS);
}

void
check_limits_sane (const struct backend *b)
{
  const struct backend_limits *l = &b->limits;

  assert_true (is_power_of_2 (l->discard_granularity));
  assert_true (l->max_discard > 0);
  assert_true (l->max_discard <= UINT64_C (1) << 30);
  assert_true (is_aligned (l->max_discard, l->discard_granularity));
  assert_true (l->min_block == 0 || is_power_of_2 (l->min_block));
  assert_true (l->pref_block == 0 || l->pref_block >= l->min_block);
  assert_true (l->can_extents == (b->ops->extents != NULL));
  assert_non_null (b->ops->pread);
  assert_non_null (b->ops->pwrite);
  assert_non_null (b->ops->zero);
  assert_non_null (b->ops->discard);
  assert_non_null (b->ops->flush);
  assert_non_null (b->ops->close);
  assert_string_equal (b->ops->kind, b->identity.kind);
}
