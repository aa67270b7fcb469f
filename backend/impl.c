/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what the backend implementations share (internal.h):
 * range checks, discard alignment, writing zeroes, the identity.  They
 * call these; nothing here calls an implementation but through b->ops.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "arith.h"
#include "backend.h"
#include "internal.h"
#include "log.h"

int
backend_check_range (struct backend *b, const char *op,
                     uint64_t offset, uint64_t length,
                     bool is_write, int beyond_errno)
{
  uint64_t end;

  if (is_write && b->limits.read_only) {
    errno = EROFS;
    dc_error ("backend %s: %s: the store is read-only",
              b->identity.name, op);
    return -1;
  }
  if (ADD_OVERFLOW (offset, length, &end)) {
    errno = EINVAL;
    dc_error ("backend %s: %s: offset %" PRIu64 " + length %" PRIu64
              " overflows", b->identity.name, op, offset, length);
    return -1;
  }
  if (end > b->size) {
    errno = beyond_errno;
    dc_error ("backend %s: %s: range %" PRIu64 "-%" PRIu64
              " is beyond the end (size %" PRIu64 ")",
              b->identity.name, op, offset, end, b->size);
    return -1;
  }
  return 0;
}

bool
backend_discard_align (struct backend *b, uint64_t *offset, uint64_t *length)
{
  uint64_t g = b->limits.discard_granularity;
  uint64_t start = round_up (*offset, g);
  uint64_t end = round_down (*offset + *length, g);

  if (end <= start)
    return false;
  if (start != *offset || end - start != *length)
    dc_debug ("backend %s: discard %" PRIu64 "+%" PRIu64 " cut to %"
              PRIu64 "+%" PRIu64, b->identity.name, *offset, *length,
              start, end - start);
  *offset = start;
  *length = end - start;
  return true;
}

/* Never written; in .bss, so it costs no space in the binary. */
static char zero_buf[256 * 1024];

int
backend_write_zeroes (struct backend *b, uint64_t offset, uint64_t length,
                      bool fua)
{
  while (length > 0) {
    uint32_t n = MIN (length, sizeof zero_buf);

    if (b->ops->pwrite (b, zero_buf, n, offset, false) == -1)
      return -1;
    offset += n;
    length -= n;
  }
  /* One flush makes every chunk durable (a FUA on the last chunk alone
   * would not cover the others on a store with native FUA).
   */
  return fua ? b->ops->flush (b) : 0;
}

void
backend_set_identity (struct backend *b, const char *kind,
                      dev_t dev, ino_t ino, const char *name)
{
  snprintf (b->identity.kind, sizeof b->identity.kind, "%s", kind);
  b->identity.dev = dev;
  b->identity.ino = ino;
  if ((size_t) snprintf (b->identity.name, sizeof b->identity.name,
                         "%s", name) >= sizeof b->identity.name)
    dc_debug ("backend name truncated to %zu bytes: %s",
              sizeof b->identity.name - 1, name);
}
