/* SPDX-License-Identifier: BSD-3-Clause */
/* discardublk: one request, through the volume.  READ and WRITE (FUA:
 * durable before the answer), FLUSH, DISCARD (FUA forwards it at once)
 * and WRITE_ZEROES (NOUNMAP: zeros without deallocating).  The kernel
 * turns a negative answer into the block layer's status for that errno.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>

#include "discardublk.h"

static int
answer (int r, uint64_t bytes)
{
  if (r == -1)
    return errno > 0 ? -errno : -EIO;
  return (int) bytes;
}

int
dublk_io (struct volume *v, const struct ublksrv_io_desc *iod, void *buf)
{
  uint64_t off = iod->start_sector << 9;
  /* Discards may exceed 4 GiB; reads and writes are within DUBLK_MAX_IO. */
  uint64_t len = (uint64_t) iod->nr_sectors << 9;
  unsigned flags = ublksrv_get_flags (iod);
  bool fua = flags & UBLK_IO_F_FUA;

  switch (ublksrv_get_op (iod)) {
  case UBLK_IO_OP_READ:
    return answer (volume_pread (v, buf, (uint32_t) len, off), len);
  case UBLK_IO_OP_WRITE:
    return answer (volume_pwrite (v, buf, (uint32_t) len, off, fua), len);
  case UBLK_IO_OP_FLUSH:
    return answer (volume_flush (v), 0);
  case UBLK_IO_OP_DISCARD:
    return answer (volume_trim (v, off, len, fua), 0);
  case UBLK_IO_OP_WRITE_ZEROES:
    return answer (volume_zero (v, off, len, !(flags & UBLK_IO_F_NOUNMAP),
                                fua, false), 0);
  default:
    return -EOPNOTSUPP;
  }
}
