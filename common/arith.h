/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: overflow-checked and alignment arithmetic on offsets.
 * Every offset + length from a client goes through these: NBD servers
 * have shipped bugs where the sum wrapped.
 */
#ifndef DISCARDCACHE_ARITH_H
#define DISCARDCACHE_ARITH_H

#include <stdbool.h>
#include <stdint.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* *r = a + b; true if the sum overflowed (then *r is unspecified). */
#define ADD_OVERFLOW(a, b, r) __builtin_add_overflow ((a), (b), (r))

/* True if x is a power of two (0 is not). */
static inline bool
is_power_of_2 (uint64_t x)
{
  return x != 0 && (x & (x - 1)) == 0;
}

/* Round down / up to a multiple of align, a power of two.  ROUND_UP of a
 * value within align of UINT64_MAX wraps: callers keep ends <= 2^63.
 */
static inline uint64_t
round_down (uint64_t x, uint64_t align)
{
  return x & ~(align - 1);
}

static inline uint64_t
round_up (uint64_t x, uint64_t align)
{
  return (x + align - 1) & ~(align - 1);
}

static inline bool
is_aligned (uint64_t x, uint64_t align)
{
  return (x & (align - 1)) == 0;
}

#endif /* DISCARDCACHE_ARITH_H */
