/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: little-endian integers in on-disk formats (the state
 * file, the thin-mode meta file), whatever the host's byte order.
 */
#ifndef DISCARDCACHE_LE_H
#define DISCARDCACHE_LE_H

#include <stdint.h>

static inline void
put_le (unsigned char *p, uint64_t v, int n)
{
  for (int i = 0; i < n; i++)
    p[i] = v >> (8 * i);
}

static inline uint64_t
get_le (const unsigned char *p, int n)
{
  uint64_t v = 0;

  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

#define put32(p, v) put_le ((p), (v), 4)
#define put64(p, v) put_le ((p), (v), 8)
#define get32(p) ((uint32_t) get_le ((p), 4))
#define get64(p) get_le ((p), 8)

#endif /* DISCARDCACHE_LE_H */
