/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the range check every volume kind makes before it
 * serves a request (volume-internal.h); apart from volume.c, which opens
 * the kinds, so that a kind never calls back into its factory.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>

#include "arith.h"
#include "log.h"
#include "volume-internal.h"

int
volume_check_range (const struct volume *v, uint64_t offset, uint64_t length,
                    bool write)
{
  uint64_t end;

  if (write && v->limits.read_only) {
    errno = EROFS;
    return -1;
  }
  if (length == 0 || ADD_OVERFLOW (offset, length, &end) || end > v->size) {
    dc_error ("request [%" PRIu64 ", +%" PRIu64 ") is outside the disk "
              "(size %" PRIu64 ")", offset, length, v->size);
    errno = EINVAL;
    return -1;
  }
  return 0;
}
