/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: CLOCK_MONOTONIC readings, for timeouts and intervals
 * (never the wall clock, which may jump), and the absolute deadlines
 * that condition variables set to CLOCK_MONOTONIC wait for.
 */
#ifndef DISCARDCACHE_CLOCK_H
#define DISCARDCACHE_CLOCK_H

#include <pthread.h>
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

/* The same, ms from now. */
static inline struct timespec
deadline_after_ms (uint64_t ms)
{
  return deadline_after_ns (ms * 1000000);
}

/* Initialise cond for the deadlines above.  pthread_cond_init alone
 * gives a CLOCK_REALTIME condition, on which a monotonic deadline is
 * long past and every timed wait returns at once.  0, or an errno.
 */
static inline int
monotonic_cond_init (pthread_cond_t *cond)
{
  pthread_condattr_t attr;
  int err = pthread_condattr_init (&attr);

  if (err == 0)
    err = pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  if (err == 0)
    err = pthread_cond_init (cond, &attr);
  pthread_condattr_destroy (&attr);
  return err;
}

#endif /* DISCARDCACHE_CLOCK_H */
