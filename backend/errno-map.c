/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the one place where a backend's errno is turned into
 * what the client is told (backend_errno in backend.h), and the data
 * operations that return it: the layers above reach a store only
 * through these, so no errno escapes unmapped.
 *
 * Each store fails in its own words: librbd answers ETIMEDOUT for a
 * cluster that does not answer and ESHUTDOWN for a client the cluster
 * fenced (EBLOCKLISTED), libnbd ENOTCONN for a server gone, Ceph EDQUOT
 * for a pool over its quota.  NBD has names for only a few errnos and
 * nbdkit sends any other as EINVAL ("invalid request"), which tells a
 * file system to stop trusting its own requests rather than the device.
 * So the data operations' errno is mapped here, once, for every backend:
 * full means ENOSPC, what NBD can say stays, everything else is EIO.
 */
#include <config.h>

#include <errno.h>

#include "backend.h"
#include "internal.h"

int
backend_errno (int err)
{
  switch (err) {
  case ENOSPC:
  case EDQUOT:                  /* a pool or user quota */
  case EFBIG:                   /* past what the store can hold */
    return ENOSPC;
  case EIO:
  case EPERM:
  case EROFS:
  case ENOMEM:
  case EINVAL:
  case EOVERFLOW:
  case ENOTSUP:
#if EOPNOTSUPP != ENOTSUP
  case EOPNOTSUPP:
#endif
    return err;
  default:                      /* ETIMEDOUT, ESHUTDOWN, ENOTCONN, ... */
    return EIO;
  }
}

/* r, with errno mapped when it is a failure. */
static int
mapped (int r)
{
  if (r == -1)
    errno = backend_errno (errno);
  return r;
}

int
backend_pread (struct backend *b, void *buf, uint32_t count, uint64_t offset)
{
  return mapped (b->ops->pread (b, buf, count, offset));
}

int
backend_pwrite (struct backend *b, const void *buf, uint32_t count,
                uint64_t offset, bool fua)
{
  return mapped (b->ops->pwrite (b, buf, count, offset, fua));
}

int
backend_zero (struct backend *b, uint64_t offset, uint64_t length,
              bool may_trim, bool fua)
{
  return mapped (b->ops->zero (b, offset, length, may_trim, fua));
}

int
backend_discard (struct backend *b, uint64_t offset, uint64_t length, bool fua)
{
  return mapped (b->ops->discard (b, offset, length, fua));
}

int
backend_flush (struct backend *b)
{
  return mapped (b->ops->flush (b));
}
