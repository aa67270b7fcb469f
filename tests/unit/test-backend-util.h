/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: checks shared by the backend test programs
 * (test-backend-file, -blkdev, -nbd).  Include after <cmocka.h>.
 */
#ifndef DISCARDCACHE_TEST_BACKEND_UTIL_H
#define DISCARDCACHE_TEST_BACKEND_UTIL_H

#include <errno.h>
#include <stdint.h>

#include "backend.h"
#include "internal.h"

/* What backend_setup opens (read-write) and starts into *state for
 * each test; backend_teardown closes it.
 */
extern const char *backend_spec;
extern int backend_setup (void **state);
extern int backend_teardown (void **state);
#define backend_unit_test(f) \
  cmocka_unit_test_setup_teardown (f, backend_setup, backend_teardown)

/* r is -1 with errno err. */
#define assert_fails_with(r, err)                 \
  do {                                            \
    int r_ = (r);                                 \
    int e_ = errno;                               \
    assert_int_equal (r_, -1);                    \
    assert_int_equal (e_, (err));                 \
  } while (0)

/* A pattern that depends on the absolute offset, so data read from the
 * wrong place does not match.
 */
extern void write_pattern (struct backend *b, uint64_t offset, uint32_t len,
                           bool fua);
extern void assert_pattern (struct backend *b, uint64_t offset, uint32_t len);
extern void assert_zeroes (struct backend *b, uint64_t offset, uint32_t len);

/* Out-of-range and overflowing requests fail with EINVAL or ENOSPC. */
extern void check_range_errors (struct backend *b);

/* A read-only backend reads, and refuses every write with EROFS. */
extern void check_read_only (struct backend *b);

/* The limits every backend must keep whatever the store. */
extern void check_limits_sane (const struct backend *b);

#endif /* DISCARDCACHE_TEST_BACKEND_UTIL_H */
