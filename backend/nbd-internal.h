/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the NBD backend's handle, shared by nbd.c (the
 * operations and the choice of a connection) and nbd-conn.c (a
 * connection and its reader thread, noticing a lost connection and
 * reconnecting).
 */
#ifndef DISCARDCACHE_BACKEND_NBD_INTERNAL_H
#define DISCARDCACHE_BACKEND_NBD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "internal.h"

/* Connections in the pool when the server has multi-conn. */
#define NBDB_POOL_MAX 4

/* Requests in flight on one connection before the next connection of
 * the pool takes new ones: nbdkit serves a connection with 16 threads
 * by default (--threads), and more requests would wait in its socket.
 */
#define NBDB_CONN_DEPTH 16

/* One connection: a libnbd handle driven by its own reader thread (the
 * aio API), so that any number of requests are in flight on it.
 */
struct nbd_conn {
  struct nbd_handle *nbd;
  pthread_t reader;
  int kick;                     /* eventfd: wakes the reader */
  bool running;                 /* the reader runs (nbdc_start) */
  atomic_bool stopping;         /* the reader is to exit */
  /* A request on it met ESHUTDOWN (the server is shutting down: the
   * connection is as good as lost) or ENOTCONN (libnbd completes the
   * requests of a lost connection so, before nbd_aio_is_dead says it).
   */
  atomic_bool broken;
  /* Under the backend's lock: */
  unsigned users;               /* requests holding it */
  bool retired;                 /* out of its slot: its last user closes it */
  bool noted_lost;              /* its loss was logged and counted */
};

struct nbd_backend {
  struct backend b;             /* first */
  char *uri;                    /* in full (identity.name may be cut) */
  pthread_mutex_t lock;         /* protects conn[], users and below */
  pthread_mutex_t reconnecting; /* one connect attempt at a time */
  unsigned nr;                  /* slots in conn[] */
  bool started;                 /* backend_start: new connections get readers */
  struct nbd_conn *conn[NBDB_POOL_MAX];
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

/* A new connection to uri, negotiated within a timeout; or NULL with
 * errno set.  Reported as an error when first (the backend's first
 * connection), else at debug level.
 */
extern struct nbd_conn *nbdc_connect (const char *uri, bool first)
  __attribute__ ((nonnull (1)));

/* Start the connection's reader thread: 0, or -1 with errno (reported).
 * Before, a request drives the connection from its own thread.
 */
extern int nbdc_start (struct nbd_conn *c) __attribute__ ((nonnull (1)));

/* Stop the reader and close the connection (no request may hold it);
 * polite says goodbye to the server first.
 */
extern void nbdc_close (struct nbd_conn *c, bool polite);

/* Wake the reader if the request just issued on c waits to be written
 * (the reader is polling for replies only).
 */
extern void nbdc_kick (struct nbd_conn *c) __attribute__ ((nonnull (1)));

/* Whether the connection is gone (dead, closed, or broken). */
extern bool nbdc_lost (struct nbd_conn *c) __attribute__ ((nonnull (1)));

/* A request on c met ESHUTDOWN or ENOTCONN: mark it broken and, the
 * first time, say goodbye on it, so that a server shutting down is not
 * kept waiting for us to close it.
 */
extern void nbdc_abandon (struct nbd_conn *c) __attribute__ ((nonnull (1)));

/* Release a connection taken from slot or by nbdc_renew; a retired one
 * is closed by its last user.
 */
extern void nbdc_put (struct nbd_backend *h, struct nbd_conn *c)
  __attribute__ ((nonnull (1, 2)));

/* c, from slot i and held by the caller, is lost: give it back and take
 * the slot's new connection, reconnecting unless another request did;
 * at most one attempt per interval after a failure, so during an outage
 * requests fail at once instead of waiting for connects.  The new
 * server must have the same size and be writable if we write.  Returns
 * the new connection, held, or NULL with errno = EIO (logged once per
 * outage).
 */
extern struct nbd_conn *nbdc_renew (struct nbd_backend *h, unsigned i,
                                    struct nbd_conn *c)
  __attribute__ ((nonnull (1, 3)));

/* The connection c in slot i was lost (why: what a request on it met):
 * log it (once per connection), and remember whether acknowledged
 * writes may have gone with it.
 */
extern void nbdc_note_lost (struct nbd_backend *h, unsigned i,
                            struct nbd_conn *c, const char *why)
  __attribute__ ((nonnull (1, 3, 4)));

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
