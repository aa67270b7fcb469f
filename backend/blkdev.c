/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the block device backend.  Discard is a real BLKDISCARD
 * (nbdkit's file plugin punches a hole instead, which the kernel turns
 * into a zero-out), cut to the queue's discard granularity; zero is
 * BLKZEROOUT with a fallback to writing zeroes; the limits come from
 * the ioctls and /sys/dev/block/MAJ:MIN/queue.  Reads and writes are
 * buffered (fd.c), so flush is a data sync of the device.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <linux/fs.h>

#include "arith.h"
#include "internal.h"
#include "log.h"

struct blkdev_backend {
  struct fd_backend fdb;        /* first: it starts with struct backend */
  uint32_t logical;             /* logical block size: ioctl alignment */
  atomic_bool can_zeroout;      /* cleared when BLKZEROOUT is refused */
};

/* An ioctl taking a {offset, length} range, retried on EINTR. */
static int
range_ioctl (int fd, unsigned long req, uint64_t offset, uint64_t length)
{
  uint64_t range[2] = { offset, length };
  int r;

  do
    r = ioctl (fd, req, range);
  while (r == -1 && errno == EINTR);
  return r;
}

/* Discard the whole granules inside the range: the engine aligns, but
 * a misaligned request is cut inward (the ioctl would refuse it).
 * EOPNOTSUPP goes back to the engine silently.
 */
static int
blkdev_discard (struct backend *b, uint64_t offset, uint64_t length, bool fua)
{
  struct blkdev_backend *h = (struct blkdev_backend *) b;

  if (backend_check_range (b, "discard", offset, length, true, EINVAL) == -1)
    return -1;
  if (!backend_discard_align_verified (b, &offset, &length))
    return 0;
  if (range_ioctl (h->fdb.fd, BLKDISCARD, offset, length) == -1) {
    if (backend_is_enotsup (errno))
      return -1;
    dc_error ("backend %s: BLKDISCARD: %m", b->identity.name);
    return -1;
  }
  /* The discard has completed, but may sit in a volatile cache. */
  return fd_backend_sync_if (b, fua);
}

/* BLKZEROOUT never deallocates (the kernel passes NOUNMAP), so may_trim
 * does not matter; it needs logical-block alignment, else zeroes are
 * written.
 */
static int
blkdev_zero (struct backend *b, uint64_t offset, uint64_t length,
             bool may_trim, bool fua)
{
  struct blkdev_backend *h = (struct blkdev_backend *) b;

  if (backend_check_range (b, "zero", offset, length, true, ENOSPC) == -1)
    return -1;
  if (length == 0)
    return 0;
  if (atomic_load (&h->can_zeroout) && is_aligned (offset | length, h->logical)) {
    if (range_ioctl (h->fdb.fd, BLKZEROOUT, offset, length) == 0)
      return fd_backend_sync_if (b, fua);
    if (!backend_is_enotsup (errno)) {
      dc_error ("backend %s: BLKZEROOUT: %m", b->identity.name);
      return -1;
    }
    dc_debug ("backend %s: BLKZEROOUT not supported: writing zeroes",
              b->identity.name);
    atomic_store (&h->can_zeroout, false);
  }
  return backend_write_zeroes (b, offset, length, fua);
}

static const struct backend_ops blkdev_ops = {
  .kind = "blkdev",
  .pread = fd_backend_pread,
  .pwrite = fd_backend_pwrite,
  .zero = blkdev_zero,
  .discard = blkdev_discard,
  .flush = fd_backend_flush,
  .extents = NULL,
  .close = fd_backend_close,
};

/* Read a number from /sys/dev/block/MAJ:MIN/queue/attr; a partition
 * has no queue directory of its own, so its disk's is used.  Returns
 * def when the attribute is missing or unreadable.
 */
static uint64_t
sysfs_queue (dev_t rdev, const char *attr, uint64_t def)
{
  char path[128];
  uint64_t v;
  int i;

  for (i = 0; i < 2; ++i) {
    FILE *fp;
    int n;

    snprintf (path, sizeof path, "/sys/dev/block/%u:%u/%squeue/%s",
              major (rdev), minor (rdev), i == 0 ? "" : "../", attr);
    fp = fopen (path, "re");
    if (fp == NULL)
      continue;
    n = fscanf (fp, "%" SCNu64, &v);
    fclose (fp);
    if (n == 1)
      return v;
  }
  dc_debug ("block device %u:%u: cannot read queue/%s, assuming %" PRIu64,
            major (rdev), minor (rdev), attr, def);
  return def;
}

/* The discard granularity must be a power of two for the engine.  Some
 * devices (RAID stripes, thin pools) report another multiple of the
 * sector; then every sector-aligned discard is allowed and the device
 * keeps ignoring what it cannot use, as it would for the kernel.
 */
static uint32_t
discard_granularity (dev_t rdev, uint32_t logical)
{
  uint64_t g = sysfs_queue (rdev, "discard_granularity", logical);

  if (g > (1 << 30) || !is_power_of_2 (g)) {
    dc_debug ("block device %u:%u: discard_granularity %" PRIu64
              " is not a power of two: using %u",
              major (rdev), minor (rdev), g, logical);
    g = logical;
  }
  return MAX (g, logical);
}

static void
blkdev_set_limits (struct backend_limits *l, dev_t rdev,
                   uint32_t logical, uint32_t physical)
{
  uint64_t max = sysfs_queue (rdev, "discard_max_bytes", 0);

  l->can_discard = !l->read_only && max > 0;
  l->can_zero = !l->read_only &&
    sysfs_queue (rdev, "write_zeroes_max_bytes", 0) > 0;
  l->can_extents = false;
  l->discard_zeroes = l->can_discard &&
    sysfs_queue (rdev, "discard_zeroes_data", 0) != 0;
  l->discard_granularity = discard_granularity (rdev, logical);
  /* Whole granules, at most BACKEND_MAX_DISCARD (loop devices say
   * 4294966784, which is not even 4K-aligned).
   */
  if (max == 0 || max > BACKEND_MAX_DISCARD)
    max = BACKEND_MAX_DISCARD;
  l->max_discard = MAX (round_down (max, l->discard_granularity),
                        l->discard_granularity);
  l->min_block = logical;
  l->pref_block = is_power_of_2 (physical) ? MAX (physical, logical) : logical;
  l->max_block = 0;
}

/* Size and block sizes from the ioctls. */
static int
blkdev_probe (int fd, const char *path, uint64_t *size,
              uint32_t *logical, uint32_t *physical)
{
  int lbs;
  unsigned int pbs;

  if (ioctl (fd, BLKGETSIZE64, size) == -1 ||
      ioctl (fd, BLKSSZGET, &lbs) == -1) {
    dc_error ("backend=%s: block device ioctl: %m", path);
    return -1;
  }
  if (lbs <= 0 || !is_power_of_2 (lbs))
    lbs = 512;
  if (ioctl (fd, BLKPBSZGET, &pbs) == -1)
    pbs = lbs;
  *logical = lbs;
  *physical = pbs;
  return 0;
}

/* Takes fd (open on path, a block device) and closes it on failure. */
struct backend *
backend_blkdev_open (const char *path, int fd, bool read_only)
{
  struct blkdev_backend *h;
  struct stat st;
  uint64_t size;
  uint32_t logical, physical;

  h = calloc (1, sizeof *h);
  if (h == NULL || fstat (fd, &st) == -1) {
    dc_error ("backend=%s: %m", path);
    goto err;
  }
  if (blkdev_probe (fd, path, &size, &logical, &physical) == -1)
    goto err;
  fd_backend_init (&h->fdb, &blkdev_ops, fd, read_only);
  h->logical = logical;
  atomic_init (&h->can_zeroout, true);
  h->fdb.b.size = size;
  blkdev_set_limits (&h->fdb.b.limits, st.st_rdev, logical, physical);
  backend_set_identity (&h->fdb.b, "blkdev", st.st_rdev, 0, path);
  backend_stable_name (st.st_rdev, h->fdb.b.identity.stable,
                       sizeof h->fdb.b.identity.stable);
  dc_debug ("backend %s: block device %u:%u (%s), size %" PRIu64
            ", discard granularity %u, max %" PRIu64,
            path, major (st.st_rdev), minor (st.st_rdev),
            h->fdb.b.identity.stable[0] ? h->fdb.b.identity.stable
                                        : "no stable name: state is tied "
                                          "to the device number",
            size, h->fdb.b.limits.discard_granularity,
            h->fdb.b.limits.max_discard);
  return &h->fdb.b;

 err:
  free (h);
  close (fd);
  return NULL;
}
