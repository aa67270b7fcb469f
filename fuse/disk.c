/* SPDX-License-Identifier: BSD-3-Clause */
/* discardfuse: the image file, `disk`.  Every request goes to the
 * volume: read and write (a write cancels the pending discards under
 * it), fallocate PUNCH_HOLE|KEEP_SIZE is a trim (what loop sends for a
 * DISCARD), ZERO_RANGE a zero, fsync and flush a volume flush.
 *
 * The image has the backend's size and cannot grow: reads past the end
 * see end of file, writes past it get ENOSPC, as on a block device.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>

#include <linux/falloc.h>

#include "arith.h"
#include "cleanup.h"
#include "discardfuse.h"

static void
reply_errno (fuse_req_t req)
{
  fuse_reply_err (req, errno > 0 ? errno : EIO);
}

/* How much of [off, off+len) lies inside the image (0 if none).  The
 * engine takes 32-bit counts; read and write are far below that.
 */
static uint64_t
inside (const struct dfuse *df, off_t off, uint64_t len)
{
  if (off < 0 || (uint64_t) off >= df->size)
    return 0;
  return MIN (len, df->size - (uint64_t) off);
}

void
disk_open (fuse_req_t req, struct fuse_file_info *fi)
{
  struct dfuse *df = fuse_req_userdata (req);
  bool writable = (fi->flags & O_ACCMODE) != O_RDONLY;

  if (writable && df->read_only) {
    fuse_reply_err (req, EROFS);
    return;
  }
  /* The engine must see every read and write: a page cache in between
   * would hide writes (which cancel discards) and serve stale data.
   */
  fi->direct_io = 1;
  fi->keep_cache = 0;
#ifdef HAVE_STRUCT_FUSE_FILE_INFO_PARALLEL_DIRECT_WRITES
  fi->parallel_direct_writes = 1;
#endif
  /* Remember whether this handle can write: only those flush at close
   * (ops.c).
   */
  fi->fh = writable;
  fuse_reply_open (req, fi);
}

void
disk_read (fuse_req_t req, size_t size, off_t off)
{
  struct dfuse *df = fuse_req_userdata (req);
  uint64_t n = inside (df, off, MIN (size, UINT32_MAX));
  CLEANUP_FREE char *buf = NULL;

  if (n == 0) {
    fuse_reply_buf (req, NULL, 0);
    return;
  }
  buf = malloc (n);
  if (buf == NULL) {
    fuse_reply_err (req, ENOMEM);
    return;
  }
  if (volume_pread (df->volume, buf, n, off) == -1)
    reply_errno (req);
  else
    fuse_reply_buf (req, buf, n);
}

/* A write with O_DSYNC (or RWF_DSYNC) is a FUA write: the kernel sends
 * no fsync after a direct write, so the engine must make it durable.
 */
void
disk_write (fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
            off_t off, struct fuse_file_info *fi)
{
  struct dfuse *df = fuse_req_userdata (req);
  uint64_t n = inside (df, off, MIN (size, UINT32_MAX));

  if (size == 0) {
    fuse_reply_write (req, 0);
    return;
  }
  if (n == 0) {
    fuse_reply_err (req, ENOSPC);
    return;
  }
  if (volume_pwrite (df->volume, buf, n, off, fi->flags & O_DSYNC) == -1)
    reply_errno (req);
  else
    fuse_reply_write (req, n);
}

/* Punching past the end is a no-op, as on any file; zeroing past it
 * without KEEP_SIZE would grow the image, which it cannot.
 */
static int
zero_range (struct dfuse *df, int mode, off_t off, off_t length)
{
  uint64_t n = inside (df, off, length);

  if (n < (uint64_t) length && !(mode & FALLOC_FL_KEEP_SIZE)) {
    errno = ENOSPC;
    return -1;
  }
  return n ? volume_zero (df->volume, off, n, false, false, false) : 0;
}

void
disk_fallocate (fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
                off_t length, struct fuse_file_info *fi)
{
  struct dfuse *df = fuse_req_userdata (req);
  uint64_t n;
  int r;

  if (off < 0 || length <= 0) {
    fuse_reply_err (req, EINVAL);
    return;
  }
  switch (mode) {
  case FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE:
    n = inside (df, off, length);
    r = n ? volume_trim (df->volume, off, n, false) : 0;
    break;
  case FALLOC_FL_ZERO_RANGE:
  case FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE:
    /* NOUNMAP zeroing from loop: may_trim stays false. */
    r = zero_range (df, mode, off, length);
    break;
  default:
    /* Allocation, collapse, insert, unshare: not for a fixed image. */
    errno = EOPNOTSUPP;
    r = -1;
  }
  if (r == -1)
    reply_errno (req);
  else
    fuse_reply_err (req, 0);
}

void
disk_sync (fuse_req_t req, bool flush)
{
  struct dfuse *df = fuse_req_userdata (req);

  if (flush && volume_flush (df->volume) == -1)
    reply_errno (req);
  else
    fuse_reply_err (req, 0);
}
