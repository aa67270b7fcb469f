/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the regular file backend.  Discard punches a hole
 * (fallocate PUNCH_HOLE|KEEP_SIZE), zero uses PUNCH_HOLE (may_trim) or
 * ZERO_RANGE and falls back to writing zeroes, extents come from
 * SEEK_DATA/SEEK_HOLE.  Reads, writes and flush are in fd.c.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/magic.h>

#include "arith.h"
#include "cleanup.h"
#include "internal.h"
#include "log.h"

struct file_backend {
  struct fd_backend fdb;        /* first: it starts with struct backend */
  /* fallocate modes, set at open and cleared when the file system first
   * answers EOPNOTSUPP, so the fallbacks are not retried every time.
   */
  atomic_bool can_punch;        /* PUNCH_HOLE */
  atomic_bool can_zero_range;   /* ZERO_RANGE */
  atomic_bool can_allocate;     /* plain fallocate (after a punch) */
};

/* fallocate, retried on EINTR; ENODEV (some file systems) means the
 * mode is not supported, like EOPNOTSUPP.
 */
static int
do_fallocate (int fd, int mode, uint64_t offset, uint64_t length)
{
  int r;

  do
    r = fallocate (fd, mode, offset, length);
  while (r == -1 && errno == EINTR);
  if (r == -1 && (errno == ENODEV || errno == ENOTSUP))
    errno = EOPNOTSUPP;
  return r;
}

/* Try one fallocate mode, remembered in *can: 1 when done, 0 when the
 * mode is not supported (now or before), -1 on an error (reported).
 */
static int
try_fallocate (struct file_backend *h, atomic_bool *can, int mode,
               uint64_t offset, uint64_t length)
{
  if (!atomic_load (can))
    return 0;
  if (do_fallocate (h->fdb.fd, mode, offset, length) == 0)
    return 1;
  if (errno == EOPNOTSUPP) {
    dc_debug ("backend %s: fallocate mode %#x not supported",
              h->fdb.b.identity.name, (unsigned) mode);
    atomic_store (can, false);
    return 0;
  }
  dc_error ("backend %s: fallocate: %m", h->fdb.b.identity.name);
  return -1;
}

/* Discard: a punched hole reads back as zeroes and frees the blocks.
 * EOPNOTSUPP goes back to the engine silently.
 */
static int
file_discard (struct backend *b, uint64_t offset, uint64_t length, bool fua)
{
  struct file_backend *h = (struct file_backend *) b;
  int r;

  if (backend_check_range (b, "discard", offset, length, true, EINVAL) == -1)
    return -1;
  if (length == 0)
    return 0;
  r = try_fallocate (h, &h->can_punch,
                     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
  if (r == 0)
    errno = EOPNOTSUPP;
  if (r != 1)
    return -1;
  return fd_backend_sync_if (b, fua);
}

/* Zero without writing: 1 when done, 0 when no fallocate mode works. */
static int
zero_by_fallocate (struct file_backend *h, uint64_t offset, uint64_t length,
                   bool may_trim)
{
  const int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
  int r;

  if (may_trim && (r = try_fallocate (h, &h->can_punch, punch,
                                      offset, length)) != 0)
    return r;
  r = try_fallocate (h, &h->can_zero_range,
                     FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, offset, length);
  if (r != 0 || may_trim)
    return r;
  /* No ZERO_RANGE (tmpfs, for one): punch, then allocate again, since
   * the caller asked to keep the blocks.  If allocating is not supported
   * the range still reads as zeroes.
   */
  if ((r = try_fallocate (h, &h->can_punch, punch, offset, length)) != 1)
    return r;
  if (try_fallocate (h, &h->can_allocate, FALLOC_FL_KEEP_SIZE,
                     offset, length) == -1)
    return -1;
  return 1;
}

static int
file_zero (struct backend *b, uint64_t offset, uint64_t length,
           bool may_trim, bool fua)
{
  struct file_backend *h = (struct file_backend *) b;
  int r;

  if (backend_check_range (b, "zero", offset, length, true, ENOSPC) == -1)
    return -1;
  if (length == 0)
    return 0;
  r = zero_by_fallocate (h, offset, length, may_trim);
  if (r == -1)
    return -1;
  if (r == 0)
    return backend_write_zeroes (b, offset, length, fua);
  return fd_backend_sync_if (b, fua);
}

/* The run that starts at offset: its type and where it ends (<= end).
 * lseek moves the shared file offset, which nothing else uses (reads
 * and writes are positional), so concurrent callers need no lock.
 */
static int
next_extent (struct file_backend *h, uint64_t offset, uint64_t end,
             uint64_t *next, uint32_t *type)
{
  off_t pos = lseek (h->fdb.fd, offset, SEEK_DATA);

  if (pos == -1 && errno == ENXIO)  /* only a hole up to end of file */
    pos = end;
  if (pos == -1)
    goto err;
  if ((uint64_t) pos > offset) {
    *type = BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO;
    *next = MIN ((uint64_t) pos, end);
    return 0;
  }
  pos = lseek (h->fdb.fd, offset, SEEK_HOLE);
  if (pos == -1)
    goto err;
  *type = 0;
  *next = MIN ((uint64_t) pos, end);
  return 0;

 err:
  dc_error ("backend %s: lseek: %m", h->fdb.b.identity.name);
  return -1;
}

/* Report the runs of [offset, offset+length).  A callback that fails
 * stops the walk; it has reported its own error.
 */
static int
file_extents (struct backend *b, uint64_t offset, uint64_t length,
              backend_extent_fn fn, void *opaque)
{
  struct file_backend *h = (struct file_backend *) b;
  uint64_t end;

  if (backend_check_range (b, "extents", offset, length, false, EINVAL) == -1)
    return -1;
  end = offset + length;
  while (offset < end) {
    uint64_t next;
    uint32_t type;

    if (next_extent (h, offset, end, &next, &type) == -1 ||
        fn (offset, next - offset, type, opaque) == -1)
      return -1;
    offset = next;
  }
  return 0;
}

static int
file_lock (struct backend *b)
{
  return backend_lock_fd (b, ((struct fd_backend *) b)->fd);
}

/* The space left to unprivileged writers on the file system holding
 * the file (what its writes can still take).
 */
static int
file_free_space (struct backend *b, uint64_t *free, uint64_t *total)
{
  struct statvfs sv;

  if (fstatvfs (((struct fd_backend *) b)->fd, &sv) == -1) {
    dc_error ("backend %s: fstatvfs: %m", b->identity.name);
    return -1;
  }
  *free = (uint64_t) sv.f_bavail * sv.f_frsize;
  *total = (uint64_t) sv.f_blocks * sv.f_frsize;
  return 0;
}

/* Whether every fdatasync of the file ends with a flush of the cache of
 * the device that also holds fd's blocks.  Read in the kernel (6.1):
 * ext4_sync_file flushes the device unless the journal commit it waits
 * for sends that flush later; xfs_file_fsync forces the log (a write
 * with a cache flush before it) or flushes the data device, except for
 * a realtime file (then only the realtime device).  Other file systems
 * are not assumed to.
 */
static bool
file_flush_covers (struct backend *b, int fd)
{
  int own = ((struct fd_backend *) b)->fd;
  struct stat mine, theirs;
  struct statfs fs;
  struct fsxattr attr;

  if (fstat (own, &mine) == -1 || fstat (fd, &theirs) == -1 ||
      fstatfs (own, &fs) == -1 || mine.st_dev != theirs.st_dev)
    return false;
  if (fs.f_type == EXT4_SUPER_MAGIC)
    return true;
  return fs.f_type == XFS_SUPER_MAGIC &&
    ioctl (own, FS_IOC_FSGETXATTR, &attr) == 0 &&
    !(attr.fsx_xflags & FS_XFLAG_REALTIME);
}

static void
file_flush_start (struct backend *b)
{
  if (sync_file_range (((struct fd_backend *) b)->fd, 0, 0,
                       SYNC_FILE_RANGE_WRITE) == -1)
    dc_debug ("backend %s: sync_file_range: %m", b->identity.name);
}

/* The blocks the file system gave the file: one fstat, no I/O. */
static int
file_allocated (struct backend *b, uint64_t *bytes)
{
  struct fd_backend *h = (struct fd_backend *) b;
  struct stat st;

  if (fstat (h->fd, &st) == -1) {
    dc_error ("backend %s: fstat: %m", b->identity.name);
    return -1;
  }
  *bytes = (uint64_t) st.st_blocks * 512;
  return 0;
}

static const struct backend_ops file_ops = {
  .kind = "file",
  .pread = fd_backend_pread,
  .pwrite = fd_backend_pwrite,
  .zero = file_zero,
  .discard = file_discard,
  .flush = fd_backend_flush,
  .flush_covers = file_flush_covers,
  .flush_start = file_flush_start,
  .extents = file_extents,
  .free_space = file_free_space,
  .lock = file_lock,
  .allocated = file_allocated,
  .close = fd_backend_close,
};

/* The file system block: holes are punched in whole blocks (a partial
 * block is zeroed by writing), so this is the discard granularity.
 * statfs f_bsize, else st_blksize, else 4096.
 */
static uint32_t
fs_block_size (int fd, const struct stat *st)
{
  struct statfs sfs;

  if (fstatfs (fd, &sfs) == 0 && sfs.f_bsize > 0 &&
      sfs.f_bsize <= (1 << 30) && is_power_of_2 (sfs.f_bsize))
    return sfs.f_bsize;
  if (st->st_blksize > 0 && st->st_blksize <= (1 << 30) &&
      is_power_of_2 (st->st_blksize))
    return st->st_blksize;
  return 4096;
}

static void
file_set_limits (struct backend_limits *l, int fd, const struct stat *st)
{
  l->can_discard = !l->read_only;
  l->can_zero = !l->read_only;
  l->can_extents = true;
  l->discard_zeroes = true;
  /* zero_by_fallocate punches with may_trim, as file_discard does; if
   * punching turns out unsupported, discard fails too and forwarding
   * stops, so a zero that fell back to ZERO_RANGE hides no discard.
   */
  l->zero_unmaps = l->can_discard;
  l->discard_granularity = fs_block_size (fd, st);
  l->max_discard = BACKEND_MAX_DISCARD;
  l->min_block = 0;             /* any byte range works */
  l->pref_block = l->discard_granularity;
  l->max_block = 0;
}

/* A file is its inode on its file system's disk: where that disk has a
 * stable name, the file keeps its identity when a reboot renumbers the
 * disk.  (A file on tmpfs or overlay has no disk; its device number
 * stays what identifies it.)
 */
static void
file_stable_name (struct backend_identity *id, const struct stat *st)
{
  char disk[sizeof id->stable];

  if (!backend_stable_name (st->st_dev, disk, sizeof disk))
    return;
  if ((size_t) snprintf (id->stable, sizeof id->stable, "%s/inode:%ju", disk,
                         (uintmax_t) st->st_ino) >= sizeof id->stable)
    id->stable[0] = '\0';
}

/* Takes fd (open on path, a regular file) and closes it on failure. */
struct backend *
backend_file_open (const char *path, int fd, bool read_only)
{
  struct file_backend *h;
  struct stat st;
  CLEANUP_FREE char *real = NULL;

  h = calloc (1, sizeof *h);
  if (h == NULL || fstat (fd, &st) == -1 ||
      (real = realpath (path, NULL)) == NULL) {
    dc_error ("backend=%s: %m", path);
    free (h);
    close (fd);
    return NULL;
  }
  fd_backend_init (&h->fdb, &file_ops, fd, read_only);
  atomic_init (&h->can_punch, true);
  atomic_init (&h->can_zero_range, true);
  atomic_init (&h->can_allocate, true);
  h->fdb.b.size = st.st_size;
  file_set_limits (&h->fdb.b.limits, fd, &st);
  backend_set_identity (&h->fdb.b, "file", st.st_dev, st.st_ino, real);
  file_stable_name (&h->fdb.b.identity, &st);
  dc_debug ("backend %s: file, size %jd, granularity %u",
            real, (intmax_t) st.st_size, h->fdb.b.limits.discard_granularity);
  return &h->fdb.b;
}
