/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: an in-memory backend that records every discard,
 * can be made slow or failing, and zeroes discarded bytes so a wrongful
 * discard shows up as lost data.
 */
#ifndef DISCARDCACHE_MEM_BACKEND_H
#define DISCARDCACHE_MEM_BACKEND_H

#include <pthread.h>
#include <stdint.h>

#include "backend.h"
#include "internal.h"

#define MEM_MAX_CALLS 4096

struct mem_discard {
  uint64_t offset;
  uint64_t length;
  int fua;
};

struct mem_backend {
  struct backend b;
  struct backend_ops ops;      /* b.ops: this backend's own copy */
  unsigned char *data;
  pthread_mutex_t lock;
  struct mem_discard calls[MEM_MAX_CALLS];
  unsigned ncalls;
  unsigned discard_delay_ms;   /* sleep before zeroing */
  int fail_errno;              /* next discards fail with this ... */
  unsigned fail_count;         /* ... this many times, */
  unsigned fail_skip;          /* after this many succeed */
  /* Called at the start of each discard, without the lock (a test's
   * way to act while the engine has one in flight).
   */
  void (*on_discard) (void *opaque);
  void *on_discard_opaque;
  unsigned zero_calls;         /* zero requests received */
  unsigned write_calls;        /* writes received */
};

/* A backend of size bytes with the given discard granularity and limit. */
extern struct mem_backend *mem_backend_new (uint64_t size,
                                            uint32_t granularity,
                                            uint64_t max_discard);

/* Report extents (before the engine opens it): each run of 4 KiB
 * blocks that hold only zeros is a hole that reads as zeros, as a
 * sparse file's would be.
 */
extern void mem_backend_enable_extents (struct mem_backend *m);

/* Copy of the recorded discards; returns how many. */
extern unsigned mem_backend_calls (struct mem_backend *m,
                                   struct mem_discard *out, unsigned max);

#endif
