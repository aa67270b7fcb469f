/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: overflow-checked and alignment arithmetic on offsets.
 * Every offset + length from a client goes through these: NBD servers
 * have shipped bugs where the sum wrapped.
 */
#ifndef DISCARDCACHE_ARITH_H
#define DISCARDCACHE_ARITH_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

/* MIN and MAX evaluate each argument once (statement expressions, as
 * nbdkit's minmax.h); __COUNTER__ gives each use its own names, so that
 * nested uses do not shadow each other.  Not for constant expressions
 * (array sizes, static initialisers): write those out.
 */
#define ARITH_CAT_(a, b) a##b
#define ARITH_CAT(a, b) ARITH_CAT_ (a, b)
#define ARITH_PICK_(a, b, op, id)                                      \
  ({                                                                    \
    __typeof__ (a) ARITH_CAT (arith_a_, id) = (a);                      \
    __typeof__ (b) ARITH_CAT (arith_b_, id) = (b);                      \
    ARITH_CAT (arith_a_, id) op ARITH_CAT (arith_b_, id) ?              \
      ARITH_CAT (arith_a_, id) : ARITH_CAT (arith_b_, id);              \
  })
#define MIN(a, b) ARITH_PICK_ ((a), (b), <, __COUNTER__)
#define MAX(a, b) ARITH_PICK_ ((a), (b), >, __COUNTER__)

/* *r = a + b; true if the sum overflowed (then *r is unspecified). */
#define ADD_OVERFLOW(a, b, r) __builtin_add_overflow ((a), (b), (r))

/* True if x is a power of two (0 is not). */
static inline bool
is_power_of_2 (uint64_t x)
{
  return x != 0 && (x & (x - 1)) == 0;
}

/* Round down / up to a multiple of align, which must be a power of two
 * (asserted: any other value gives a wrong answer silently).  round_up
 * of a value within align of UINT64_MAX wraps: callers keep ends <= 2^63.
 */
static inline uint64_t
round_down (uint64_t x, uint64_t align)
{
  assert (is_power_of_2 (align));
  return x & ~(align - 1);
}

static inline uint64_t
round_up (uint64_t x, uint64_t align)
{
  assert (is_power_of_2 (align));
  return (x + align - 1) & ~(align - 1);
}

static inline bool
is_aligned (uint64_t x, uint64_t align)
{
  assert (is_power_of_2 (align));
  return (x & (align - 1)) == 0;
}

#endif /* DISCARDCACHE_ARITH_H */
