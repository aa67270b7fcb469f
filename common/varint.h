/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: LEB128 varints in a memory buffer (thin mode's
 * checkpoint): 7 bits a byte, low first, the top bit set on every byte
 * but the last.
 */
#ifndef DISCARDCACHE_VARINT_H
#define DISCARDCACHE_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* The most bytes one uint64_t takes. */
#define VARINT_MAX_BYTES 10

/* Append v at p (room for VARINT_MAX_BYTES); returns the bytes written. */
static inline size_t
varint_put (unsigned char *p, uint64_t v)
{
  size_t n = 0;

  do {
    p[n++] = (v & 0x7f) | (v > 0x7f ? 0x80 : 0);
    v >>= 7;
  } while (v);
  return n;
}

/* Read one varint from [*pos, end) into *v and advance *pos.  0, or -1
 * when it runs past end or overflows 64 bits.
 */
static inline int
varint_get (const unsigned char **pos, const unsigned char *end, uint64_t *v)
{
  const unsigned char *p = *pos;
  uint64_t x = 0;

  for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
    unsigned char b = *p++;

    if (shift == 63 && b > 1)
      return -1;
    x |= (uint64_t) (b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      *pos = p;
      return 0;
    }
  }
  return -1;
}

#endif /* DISCARDCACHE_VARINT_H */
