/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: the block device backend on a loop device.
 * Usage: test-backend-blkdev /dev/loopN BACKING-FILE
 * (run by tests/e2e/test-backend-blkdev.sh, which sets the device up).
 *
 * On a loop device over a file, BLKDISCARD punches a hole in the
 * backing file, so the file's st_blocks drop: a plain overwrite with
 * zeroes would not do that, which proves the discard was real.
 */
#include <config.h>

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "arith.h"
#include "backend.h"
#include "internal.h"
#include "test-backend-util.h"

#define MiB (1024 * 1024)

static const char *backing_path;   /* the device is backend_spec */

static uint64_t
sysfs_queue (dev_t rdev, const char *attr)
{
  char path[128];
  uint64_t v = 0;
  FILE *fp;

  snprintf (path, sizeof path, "/sys/dev/block/%u:%u/queue/%s",
            major (rdev), minor (rdev), attr);
  fp = fopen (path, "r");
  assert_non_null (fp);
  assert_int_equal (fscanf (fp, "%" SCNu64, &v), 1);
  fclose (fp);
  return v;
}

static blkcnt_t
backing_blocks (struct backend *b)
{
  struct stat st;

  assert_int_equal (backend_flush (b), 0);
  assert_int_equal (stat (backing_path, &st), 0);
  return st.st_blocks;
}

static void
test_identity_and_limits (void **state)
{
  struct backend *b = *state;
  const struct backend_limits *l = &b->limits;
  struct stat st, bst;
  uint64_t max, g;

  assert_int_equal (stat (backend_spec, &st), 0);
  assert_int_equal (stat (backing_path, &bst), 0);
  assert_int_equal (b->size, bst.st_size);
  assert_string_equal (b->identity.kind, "blkdev");
  assert_string_equal (b->identity.name, backend_spec);
  assert_true (b->identity.dev == st.st_rdev);
  assert_true (b->identity.ino == 0);
  check_limits_sane (b);

  g = sysfs_queue (st.st_rdev, "discard_granularity");
  max = sysfs_queue (st.st_rdev, "discard_max_bytes");
  assert_true (max > 0);
  assert_true (l->can_discard);
  assert_int_equal (l->discard_granularity, g);
  assert_int_equal (l->max_discard, round_down (MIN (max, UINT64_C (1024) * MiB), g));
  assert_int_equal (l->min_block,
                    sysfs_queue (st.st_rdev, "logical_block_size"));
  assert_int_equal (l->pref_block,
                    sysfs_queue (st.st_rdev, "physical_block_size"));
  assert_int_equal (l->can_zero,
                    sysfs_queue (st.st_rdev, "write_zeroes_max_bytes") > 0);
  assert_false (l->discard_zeroes);
  assert_false (l->zero_unmaps);
  assert_false (l->can_extents);
  assert_false (l->read_only);
  assert_true (l->can_fua);
  assert_true (l->can_flush);
  assert_true (l->can_multi_conn);
}

static void
test_discard_is_real (void **state)
{
  struct backend *b = *state;
  blkcnt_t before, after;

  write_pattern (b, 0, 8 * MiB, false);
  before = backing_blocks (b);
  assert_true (before >= 8 * MiB / 512);
  assert_int_equal (backend_discard (b, 2 * MiB, 4 * MiB, true), 0);
  after = backing_blocks (b);
  assert_true (after <= before - 4 * MiB / 512);
  assert_pattern (b, 0, 2 * MiB);
  assert_zeroes (b, 2 * MiB, 4 * MiB);  /* a hole in the backing file */
  assert_pattern (b, 6 * MiB, 2 * MiB);
}

/* A misaligned discard is cut inward to whole granules; one smaller
 * than a granule does nothing.
 */
static void
test_discard_misaligned (void **state)
{
  struct backend *b = *state;
  uint32_t g = b->limits.discard_granularity;
  blkcnt_t before;

  write_pattern (b, 0, 2 * MiB, false);
  before = backing_blocks (b);
  assert_int_equal (backend_discard (b, MiB + 512, g - 1024, false), 0);
  assert_true (backing_blocks (b) == before);
  assert_int_equal (backend_discard (b, MiB - 512, 2 * g + 1024, false), 0);
  assert_true (backing_blocks (b) <= before - 2 * g / 512);
  assert_pattern (b, 0, MiB);
  assert_zeroes (b, MiB, 2 * g);
  assert_pattern (b, MiB + 2 * g, MiB - 2 * g);
}

static void
test_zero (void **state)
{
  struct backend *b = *state;

  write_pattern (b, 0, 4 * MiB, false);
  /* Aligned: BLKZEROOUT.  Unaligned: zeroes written. */
  assert_int_equal (backend_zero (b, MiB, MiB, false, true), 0);
  assert_int_equal (backend_zero (b, 3 * MiB + 100, 1000, true, false), 0);
  assert_pattern (b, 0, MiB);
  assert_zeroes (b, MiB, MiB);
  assert_pattern (b, 2 * MiB, MiB + 100);
  assert_zeroes (b, 3 * MiB + 100, 1000);
  assert_pattern (b, 3 * MiB + 1100, MiB - 1100);
}

static void
test_read_write (void **state)
{
  struct backend *b = *state;

  write_pattern (b, 12345, MiB, true);
  write_pattern (b, b->size - 4096, 4096, false);
  assert_pattern (b, 12345, MiB);
  assert_pattern (b, b->size - 4096, 4096);
  assert_int_equal (backend_flush (b), 0);
}

static void
test_range_errors (void **state)
{
  check_range_errors (*state);
}

/* A device open for writing is held exclusively: a second writer (or a
 * mount) is refused with EBUSY, a reader is not.
 */
static void
test_exclusive (void **state)
{
  struct backend *ro;

  assert_null (backend_open (backend_spec, false));
  assert_int_equal (errno, EBUSY);
  ro = backend_open (backend_spec, true);
  assert_non_null (ro);
  check_read_only (ro);
  backend_close (ro);
}

int
main (int argc, char *argv[])
{
  const struct CMUnitTest tests[] = {
    backend_unit_test (test_identity_and_limits),
    backend_unit_test (test_discard_is_real),
    backend_unit_test (test_discard_misaligned),
    backend_unit_test (test_zero),
    backend_unit_test (test_read_write),
    backend_unit_test (test_range_errors),
    backend_unit_test (test_exclusive),
  };

  if (argc != 3) {
    fprintf (stderr, "usage: %s DEVICE BACKING-FILE\n", argv[0]);
    return 2;
  }
  backend_spec = argv[1];
  backing_path = argv[2];
  return cmocka_run_group_tests (tests, NULL, NULL);
}
