/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the NBD backend's handle, shared by nbd.c (the
 * operations and the pool) and nbd-conn.c (connecting, noticing a lost
 * connection and reconnecting).
 */
#ifndef DISCARDCACHE_BACKEND_NBD_INTERNAL_H
#define DISCARDCACHE_BACKEND_NBD_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "backend.h"

/* Connections in the pool when the server has multi-conn. */
#define NBDB_POOL_MAX 4

struct nbd_backend {
  struct backend b;             /* first */
  char *uri;                    /* in full (identity.name may be cut) */
  pthread_mutex_t lock;         /* protects busy[] and the fields below it */
  pthread_cond_t freed;         /* signalled when a connection is freed */
  unsigned nr;                  /* connections in nbd[] */
  bool busy[NBDB_POOL_MAX];
  /* A slot's handle belongs to whoever holds the slot (busy), and so
   * does its leaving flag: the server answered ESHUTDOWN on it (it is
   * shutting down), so the connection is as good as lost.
   */
  struct nbd_handle *nbd[NBDB_POOL_MAX];
  bool leaving[NBDB_POOL_MAX];
  /* What the server can do (b.limits may say less, e.g. read-only). */
  bool can_trim, can_zero, can_fua, can_flush, can_extents;
  uint32_t max_request;         /* pread/pwrite chunk */

  /* Reconnection (nbd-conn.c), under lock. */
  uint64_t next_attempt_ms;     /* no connect before this, after a failure */
  bool down;                    /* the last connect failed (logged once) */
  /* Writes that a lost connection may have taken with it: acknowledged
   * writes are counted; a flush records how many it covered; a lost
   * connection with writes beyond that makes the next flush fail.
   */
  uint64_t writes, flushed_writes;
  uint64_t losses;
  bool lost_writes;
};

/* A new connection to uri, negotiated within a timeout, or NULL with
 * errno set.  Reported as an error when first (the backend's first
 * connection), else at debug level.
 */
extern struct nbd_handle *nbdc_connect (const char *uri, bool first)
  __attribute__ ((nonnull (1)));

/* Whether the handle's connection is gone (dead or closed). */
extern bool nbdc_lost (struct nbd_handle *nbd) __attribute__ ((nonnull (1)));

/* Make slot i (held by the caller) usable, reconnecting a lost
 * connection (or one whose server said it is leaving); at most one attempt per interval across the pool after a
 * failure, so during an outage requests fail at once instead of waiting
 * for connects.  The new server must have the same size and be
 * writable if we write.  Returns 0, or -1 with errno = EIO (logged once
 * per outage).
 */
extern int nbdc_ensure (struct nbd_backend *h, unsigned i)
  __attribute__ ((nonnull (1)));

/* The connection in slot i was lost: log it, and remember whether
 * acknowledged writes may have gone with it.
 */
extern void nbdc_note_lost (struct nbd_backend *h, unsigned i)
  __attribute__ ((nonnull (1)));

/* Bookkeeping for the flush after a loss: a write was acknowledged; a
 * flush is starting (returns the token to pass to nbdc_flush_done);
 * a flush succeeded: returns -1 with errno = EIO (reported) if a
 * connection was lost with writes that no flush had covered.
 */
extern void nbdc_write_done (struct nbd_backend *h) __attribute__ ((nonnull (1)));
extern void nbdc_flush_start (struct nbd_backend *h, uint64_t token[2])
  __attribute__ ((nonnull (1, 2)));
extern int nbdc_flush_done (struct nbd_backend *h, const uint64_t token[2])
  __attribute__ ((nonnull (1, 2)));

#endif /* DISCARDCACHE_BACKEND_NBD_INTERNAL_H */
