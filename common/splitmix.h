/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: splitmix64, a tiny seeded random number generator that
 * gives the same sequence everywhere (tests, fuzzers and benchmarks).
 */
#ifndef DISCARDCACHE_SPLITMIX_H
#define DISCARDCACHE_SPLITMIX_H

#include <stdint.h>

/* The next number of the sequence that *state carries. */
static inline uint64_t
splitmix_next (uint64_t *state)
{
  uint64_t z = (*state += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform enough in [0, n), n > 0: the modulo bias is irrelevant here. */
static inline uint64_t
splitmix_below (uint64_t *state, uint64_t n)
{
  return splitmix_next (state) % n;
}

#endif /* DISCARDCACHE_SPLITMIX_H */
