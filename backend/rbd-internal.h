/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the RBD backend's pieces, shared by rbd-spec.c (the
 * spec), rbd-cluster.c (connecting, opening, locking), rbd-space.c (the
 * space held, the pool's free space) and rbd.c (the operations).
 */
#ifndef DISCARDCACHE_BACKEND_RBD_INTERNAL_H
#define DISCARDCACHE_BACKEND_RBD_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
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

/* How often, at most, the space held is recomputed (a diff over the
 * whole image: the object map's size with fast-diff, a listing of the
 * objects without).
 */
#define RBD_ALLOCATED_INTERVAL_MS 5000

/* How often, at most, the pool's free space is asked of the monitor
 * (two commands, df and osd pool get-quota).  The answer lags anyway:
 * the monitor has it from ceph-mgr, which gathers the OSDs' statistics
 * every mgr_stats_period (5 s by default).
 */
#define RBD_FREE_INTERVAL_MS 1000

/* A figure (or two) recomputed at most every interval (rbd-space.c). */
struct rbd_cache {
  atomic_flag busy;             /* a caller is computing */
  _Atomic uint64_t at_ms;       /* when last computed; 0: never */
  _Atomic uint64_t v[2];
  _Atomic int err;              /* 0, or errno while nothing computed */
};

struct rbd_backend {
  struct backend b;             /* first */
  const struct rbd_lib *lib;    /* librados's and librbd's functions */
  rados_t cluster;
  rados_ioctx_t ioctx;
  rbd_image_t image;
  struct rbd_spec spec;
  struct backend_options opts;  /* copied, to connect again after a fork */
  uint64_t object_size;
  uint64_t features;            /* RBD_FEATURE_* */
  bool locked;                  /* we hold the exclusive lock ... */
  bool relock;                  /* ... or held it before the fork */
  struct rbd_cache allocated;   /* backend_allocated's figure */
  struct rbd_cache free;        /* the pool's free space and total */
};

/* Connect to the cluster the options name, open the pool, the namespace
 * and the image (read-only for a snapshot or o->read_only), each step
 * bounded by rbd-timeout.  0, or -1 with errno set, reported naming the
 * key to fix.  On failure, what was opened stays in h for rbd_disconnect.
 */
extern int rbd_connect (struct rbd_backend *h, const struct backend_options *o)
  __attribute__ ((nonnull (1, 2)));

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

/* Set c to nothing computed yet. */
extern void rbd_cache_init (struct rbd_cache *c) __attribute__ ((nonnull (1)));

/* backend_allocated: what `rbd du` reports as used, cached. */
extern int rbd_allocated (struct backend *b, uint64_t *bytes)
  __attribute__ ((nonnull (1, 2)));

/* The free_space op: what writes to the image can still take, the
 * pool's MAX AVAIL (`ceph df`: replication, the CRUSH rule's OSDs and
 * their full ratio counted), or its quota's remainder if less; total,
 * that plus what the pool holds (with a quota: the quota).  A namespace
 * shares its pool's space.  Cached for RBD_FREE_INTERVAL_MS.
 */
extern int rbd_free_space (struct backend *b, uint64_t *free,
                           uint64_t *total)
  __attribute__ ((nonnull (1, 2, 3)));

/* Report a librados/librbd failure r (a negative errno) of op, set errno
 * and return -1.
 */
extern int rbd_fail (struct rbd_backend *h, const char *op, int r)
  __attribute__ ((nonnull (1, 2)));

#endif /* DISCARDCACHE_BACKEND_RBD_INTERNAL_H */
