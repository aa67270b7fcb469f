/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the RBD backend's pieces, shared by rbd-spec.c (the
 * spec), rbd-cluster.c (connecting, opening, locking), rbd-space.c (the
 * space held, the pool's free space) and rbd.c (the operations).
 */
#ifndef DISCARDCACHE_BACKEND_RBD_INTERNAL_H
#define DISCARDCACHE_BACKEND_RBD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"
#include "rbd-lib.h"

/* The parts of rbd:POOL/[NAMESPACE/]IMAGE[@SNAP]. */
struct rbd_spec {
  char *pool;
  char *nspace;                 /* "" for the default namespace */
  char *image;
  char *snap;                   /* NULL: the image itself */
};

#define RBD_SPEC_FORMS "rbd:POOL/IMAGE, rbd:POOL/NAMESPACE/IMAGE or " \
  "rbd:POOL/IMAGE@SNAPSHOT (read-only)"

/* Split spec (which starts with rbd:) into sp, strings owned by sp.
 * 0, or -1 with errno EINVAL (reported: naming backend= and the forms)
 * or ENOMEM.
 */
extern int rbd_spec_parse (const char *spec, struct rbd_spec *sp)
  __attribute__ ((nonnull (1, 2)));
extern void rbd_spec_free (struct rbd_spec *sp) __attribute__ ((nonnull (1)));

/* The default bound on each cluster operation (rbd-timeout=). */
#define RBD_DEFAULT_TIMEOUT_MS 30000

/* How often the space held is recomputed while someone reads it (a
 * diff over the whole image: the object map's size with fast-diff, a
 * listing of the objects without).
 */
#define RBD_ALLOCATED_INTERVAL_MS 5000

/* How often the pool's free space and full flags are asked of the
 * monitor while someone reads them (three commands: df, osd pool
 * get-quota, osd pool ls detail).  The answer lags anyway: the monitor
 * has the figures from ceph-mgr, which gathers the OSDs' statistics
 * every mgr_stats_period (5 s by default).
 */
#define RBD_FREE_INTERVAL_MS 1000

/* A reader that stops asking for a figure stops its refreshing after
 * this long: nobody pays for a walk of the image nobody looks at.
 */
#define RBD_WANTED_MS 60000

/* The pool's state in the OSD map (osd pool ls detail: its flags_names). */
#define RBD_POOL_NEARFULL 1u
#define RBD_POOL_FULL 2u
#define RBD_POOL_FULL_QUOTA 4u

/* A figure (or two) read by the space thread (rbd-space.c), under
 * rbd_space.lock.
 */
struct rbd_reading {
  uint64_t v[2];
  uint64_t at_ms;               /* when last read; 0: never */
  uint64_t tried_ms;            /* when last tried, read or not */
  uint64_t wanted_ms;           /* when a reader last asked */
  int err;                      /* the last attempt's errno, 0: it worked */
};

/* The space thread: the figures that cost a round trip to the cluster,
 * refreshed in the background so that no reader (the control socket's
 * stats, the flusher's low-water check) ever waits on the cluster.
 */
struct rbd_space {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  bool running;
  bool stop;
  struct rbd_reading allocated; /* v[0]: the bytes rbd du counts */
  struct rbd_reading free;      /* v[0] free, v[1] total */
  unsigned pool_flags;          /* RBD_POOL_*, read with free */
  bool quiet;                   /* the thread's: a reading failing again */
};

struct rbd_backend {
  struct backend b;             /* first */
  const struct rbd_lib *lib;    /* librados's and librbd's functions */
  rados_t cluster;
  rados_ioctx_t ioctx;
  rbd_image_t image;
  struct rbd_spec spec;
  /* Copied (strings owned), to connect again after a fork. */
  struct backend_rbd_options opts;
  bool read_only;               /* opened read-only (backend_options) */
  uint64_t object_size;
  uint64_t features;            /* RBD_FEATURE_* */
  bool locked;                  /* we hold the exclusive lock ... */
  bool relock;                  /* ... or held it before the fork */
  struct rbd_space space;       /* rbd-space.c */
};

/* Connect to the cluster h->opts names, open the pool, the namespace
 * and the image (read-only for a snapshot or h->read_only), each step
 * bounded by rbd-timeout.  0, or -1 with errno set, reported naming the
 * key to fix.  On failure, what was opened stays in h for rbd_disconnect.
 */
extern int rbd_connect (struct rbd_backend *h) __attribute__ ((nonnull (1)));

/* Close the image, the pool and the cluster connection (any of them may
 * be unset).
 */
extern void rbd_disconnect (struct rbd_backend *h) __attribute__ ((nonnull (1)));

/* backend_lock: take the image's exclusive lock, refusing (EAGAIN) if a
 * live client holds it rather than asking it to hand the lock over.
 */
extern int rbd_lock (struct backend *b) __attribute__ ((nonnull (1)));

/* backend_before_fork and backend_after_fork: disconnect, then connect,
 * check that the image is the same size, and lock it again if it was.
 */
extern int rbd_before_fork (struct backend *b) __attribute__ ((nonnull (1)));
extern int rbd_after_fork (struct backend *b) __attribute__ ((nonnull (1)));

/* Set up h->space (no thread yet). */
extern void rbd_space_init (struct rbd_backend *h)
  __attribute__ ((nonnull (1)));

/* backend_start: start the space thread.  0, or -1 with errno set
 * (reported).
 */
extern int rbd_space_start (struct backend *b) __attribute__ ((nonnull (1)));

/* Stop and join the space thread (it may be in a cluster command,
 * bounded by rbd-timeout=), and free h->space.
 */
extern void rbd_space_stop (struct rbd_backend *h)
  __attribute__ ((nonnull (1)));

/* Read the pool's free space now, on the caller's thread: at open when
 * low-water= needs it, so that a cluster without pool statistics (no
 * ceph-mgr) is refused before serving.  0, or -1 with errno set
 * (reported, naming low-water=).
 */
extern int rbd_space_check (struct rbd_backend *h)
  __attribute__ ((nonnull (1)));

/* backend_allocated: what `rbd du` reports as used, as last read (never
 * waits; EAGAIN, silently, until the first reading).
 */
extern int rbd_allocated (struct backend *b, uint64_t *bytes)
  __attribute__ ((nonnull (1, 2)));

/* The free_space op: what writes to the image can still take, the
 * pool's MAX AVAIL (`ceph df`: replication, the CRUSH rule's OSDs and
 * their full ratio counted), or its quota's remainder if less, and 0
 * while the OSD map flags the pool nearfull, full or over its quota
 * (so that low-water= forwards pending discards at once); total, that
 * plus what the pool holds (with a quota: the quota).  A namespace
 * shares its pool's space.  As last read (never waits; EAGAIN, silently,
 * until the first reading).
 */
extern int rbd_free_space (struct backend *b, uint64_t *free,
                           uint64_t *total)
  __attribute__ ((nonnull (1, 2, 3)));

/* backend_readings: the space thread's figures' age and last error. */
extern int rbd_readings (struct backend *b, struct backend_readings *r)
  __attribute__ ((nonnull (1, 2)));

/* One request waited for within a bound (rbd-wait.c).  rbd_wait_new
 * makes the completion *c to pass to an rbd_aio_* call, and, when
 * bounce_len > 0, a buffer of that size (rbd_wait_buffer) for a read to
 * land in.  NULL with errno set (reported).
 */
struct rbd_wait;
extern struct rbd_wait *rbd_wait_new (struct rbd_backend *h,
                                      size_t bounce_len, rbd_completion_t *c)
  __attribute__ ((nonnull (1, 3)));
extern void *rbd_wait_buffer (struct rbd_wait *w) __attribute__ ((nonnull (1)));

/* The rbd_aio_* call failed: release c and w. */
extern void rbd_wait_not_sent (struct rbd_wait *w, rbd_completion_t c)
  __attribute__ ((nonnull (1)));

/* Wait for the request at most timeout_ms; then w is gone (a request
 * still running is left to finish on its own).  Its return value (a
 * negative errno on failure), or -ETIMEDOUT.  A read that completed
 * copies out_len bytes of its buffer to out.
 */
extern ssize_t rbd_wait_for (struct rbd_wait *w, uint64_t timeout_ms,
                             void *out, size_t out_len)
  __attribute__ ((nonnull (1)));

/* rbd-timeout=, in milliseconds (the default if unset). */
extern uint64_t rbd_timeout_ms (const struct rbd_backend *h)
  __attribute__ ((nonnull (1)));

/* The lock owners and watchers looked at, at most. */
#define RBD_MAX_CLIENTS 16

/* After taking the lock (rbd-holder.c): record our lock address in the
 * image's metadata (naming this server to others) and in
 * opts.holder_file (for our next instance).  Failures are logged.
 */
extern void rbd_holder_record (struct rbd_backend *h)
  __attribute__ ((nonnull (1)));

/* Whether the lock owner at address owner is the instance of this
 * server that opts.holder_file names.
 */
extern bool rbd_holder_is_ours (struct rbd_backend *h, const char *owner)
  __attribute__ ((nonnull (1, 2)));

/* What kind of client owner is, for a refusal, into buf. */
extern void rbd_holder_describe (struct rbd_backend *h, const char *owner,
                                 char *buf, size_t len)
  __attribute__ ((nonnull (1, 2, 3)));

/* Fence owner (blocklisted by the cluster, librbd's
 * rbd_blocklist_on_break_lock) and break its lock.  0, or -1 with errno
 * set (reported).
 */
extern int rbd_holder_fence (struct rbd_backend *h, const char *owner)
  __attribute__ ((nonnull (1, 2)));

/* Report a librados/librbd failure r (a negative errno) of op, set errno
 * and return -1.
 */
extern int rbd_fail (struct rbd_backend *h, const char *op, int r)
  __attribute__ ((nonnull (1, 2)));

#endif /* DISCARDCACHE_BACKEND_RBD_INTERNAL_H */
