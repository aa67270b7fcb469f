/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the part of the file and block device backends that is
 * the same for both: buffered pread/pwrite loops on one fd, FUA, flush.
 *
 * One fd serves every thread: pread/pwrite carry their own offset, and a
 * data sync of the fd covers writes made by any thread (can_multi_conn).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"

void
fd_backend_init (struct fd_backend *h, const struct backend_ops *ops,
                 int fd, bool read_only)
{
  h->b.ops = ops;
  h->fd = fd;
  atomic_init (&h->can_dsync, true);
  h->b.limits.read_only = read_only;
  h->b.limits.can_fua = !read_only;
  h->b.limits.can_flush = true;
  h->b.limits.can_multi_conn = true;
}

/* A short read means the file shrank under us after open (the engine
 * never reads past the size it was given).  Rather than invent zeroes
 * for data that someone else removed, fail with EIO.
 */
int
fd_backend_pread (struct backend *b, void *buf, uint32_t count,
                  uint64_t offset)
{
  struct fd_backend *h = (struct fd_backend *) b;
  char *p = buf;

  if (backend_check_range (b, "pread", offset, count, false, EINVAL) == -1)
    return -1;
  while (count > 0) {
    ssize_t r = pread (h->fd, p, count, offset);

    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1) {
      dc_error ("backend %s: pread: %m", b->identity.name);
      return -1;
    }
    if (r == 0) {
      errno = EIO;
      dc_error ("backend %s: pread: unexpected end of file at %" PRIu64
                " (the store shrank?)", b->identity.name, offset);
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

/* One write call: with fua, pwritev2 (RWF_DSYNC) syncs just this write;
 * *synced tells the caller whether that happened.
 */
static ssize_t
write_once (struct fd_backend *h, const void *buf, size_t count,
            uint64_t offset, bool fua, bool *synced)
{
  struct iovec iov = { .iov_base = (void *) buf, .iov_len = count };
  ssize_t r;

  *synced = false;
  if (fua && atomic_load (&h->can_dsync)) {
    r = pwritev2 (h->fd, &iov, 1, offset, RWF_DSYNC);
    if (r >= 0 || !(backend_is_enotsup (errno) || errno == ENOSYS)) {
      *synced = r >= 0;
      return r;
    }
    dc_debug ("backend %s: pwritev2 RWF_DSYNC: %m: using fdatasync",
              h->b.identity.name);
    atomic_store (&h->can_dsync, false);
  }
  return pwrite (h->fd, buf, count, offset);
}

int
fd_backend_pwrite (struct backend *b, const void *buf, uint32_t count,
                   uint64_t offset, bool fua)
{
  struct fd_backend *h = (struct fd_backend *) b;
  const char *p = buf;
  bool synced = true;

  if (backend_check_range (b, "pwrite", offset, count, true, ENOSPC) == -1)
    return -1;
  while (count > 0) {
    bool s;
    ssize_t r = write_once (h, p, count, offset, fua, &s);

    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1) {
      dc_error ("backend %s: pwrite: %m", b->identity.name);
      return -1;
    }
    if (r == 0) {
      errno = EIO;
      dc_error ("backend %s: pwrite: wrote nothing at %" PRIu64,
                b->identity.name, offset);
      return -1;
    }
    synced = synced && s;
    p += r;
    count -= r;
    offset += r;
  }
  return fd_backend_sync_if (b, fua && !synced);
}

int
fd_backend_flush (struct backend *b)
{
  struct fd_backend *h = (struct fd_backend *) b;

  if (fdatasync (h->fd) == -1) {
    dc_error ("backend %s: fdatasync: %m", b->identity.name);
    return -1;
  }
  return 0;
}

int
fd_backend_sync_if (struct backend *b, bool fua)
{
  return fua ? fd_backend_flush (b) : 0;
}

void
fd_backend_close (struct backend *b)
{
  struct fd_backend *h = (struct fd_backend *) b;

  if (close (h->fd) == -1)
    dc_debug ("backend %s: close: %m", b->identity.name);
  free (h);
}
