/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: CLOCK_MONOTONIC readings, for timeouts and intervals
 * (never the wall clock, which may jump), and the absolute deadlines
 * that condition variables set to CLOCK_MONOTONIC wait for.
 */
#ifndef DISCARDCACHE_CLOCK_H
#define DISCARDCACHE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline uint64_t
monotonic_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

/* Milliseconds on CLOCK_MONOTONIC. */
static inline uint64_t
monotonic_ms (void)
{
  return monotonic_ns () / 1000000;
}

/* The CLOCK_MONOTONIC time ns from now, for pthread_cond_timedwait on
 * a condition whose clock is CLOCK_MONOTONIC.
 */
static inline struct timespec
deadline_after_ns (uint64_t ns)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  ns += (uint64_t) ts.tv_nsec;
  ts.tv_sec += ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  return ts;
}

#endif /* DISCARDCACHE_CLOCK_H */
