/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: one librbd request waited for within rbd-timeout=
 * (rbd-internal.h, rbd_wait_*).
 *
 * librados's own bounds (rados_osd_op_timeout) are per operation on an
 * object: a request that librbd retries, or that waits for the image's
 * lock first, took twice rbd-timeout= here before it failed, and a
 * request paused by the client for a full pool is not bounded at all.
 * So the caller waits on its own deadline, once per request.  A request
 * still running at the deadline is left to librbd: its completion is
 * released, and its read buffer freed, by the callback when it ends.
 * The caller gets ETIMEDOUT and may free its own buffers: a read lands
 * in a buffer of ours (copied out when it completes in time), and a
 * write's data was copied by librbd at submission
 * (rbd_disable_zero_copy_writes, which rbd-cluster.c keeps on).  A late
 * request still reaches the OSDs in order with the later requests of
 * this client, so a late discard cannot land over a later write.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "rbd-internal.h"

struct rbd_wait {
  const struct rbd_lib *lib;
  pthread_mutex_t lock;
  pthread_cond_t done_cond;
  int refs;                     /* the waiter's and the callback's */
  bool done;
  ssize_t r;
  void *bounce;                 /* a read's data, owned here */
};

static void
put_unlocked (struct rbd_wait *w)
{
  pthread_cond_destroy (&w->done_cond);
  pthread_mutex_destroy (&w->lock);
  free (w->bounce);
  free (w);
}

/* Drop a reference, w->lock held; the last one frees w. */
static void
put_locked (struct rbd_wait *w)
{
  bool last = --w->refs == 0;

  pthread_mutex_unlock (&w->lock);
  if (last)
    put_unlocked (w);
}

/* librbd's callback, on one of its threads, when the request ends. */
static void
completed (rbd_completion_t c, void *arg)
{
  struct rbd_wait *w = arg;
  ssize_t r = w->lib->rbd_aio_get_return_value (c);

  w->lib->rbd_aio_release (c);
  pthread_mutex_lock (&w->lock);
  w->r = r;
  w->done = true;
  pthread_cond_signal (&w->done_cond);
  put_locked (w);
}

struct rbd_wait *
rbd_wait_new (struct rbd_backend *h, size_t bounce_len, rbd_completion_t *c)
{
  struct rbd_wait *w = calloc (1, sizeof *w);
  int r;

  if (w == NULL || (bounce_len && (w->bounce = malloc (bounce_len)) == NULL)) {
    free (w);
    rbd_fail (h, "request", -ENOMEM);
    return NULL;
  }
  w->lib = h->lib;
  w->refs = 2;
  pthread_mutex_init (&w->lock, NULL);
  monotonic_cond_init (&w->done_cond);
  r = h->lib->rbd_aio_create_completion (w, completed, c);
  if (r < 0) {
    put_unlocked (w);
    rbd_fail (h, "request", r);
    return NULL;
  }
  return w;
}

void *
rbd_wait_buffer (struct rbd_wait *w)
{
  return w->bounce;
}

void
rbd_wait_not_sent (struct rbd_wait *w, rbd_completion_t c)
{
  w->lib->rbd_aio_release (c);
  put_unlocked (w);
}

ssize_t
rbd_wait_for (struct rbd_wait *w, uint64_t timeout_ms, void *out,
              size_t out_len)
{
  struct timespec until = deadline_after_ms (timeout_ms);
  ssize_t r;

  pthread_mutex_lock (&w->lock);
  while (!w->done &&
         pthread_cond_timedwait (&w->done_cond, &w->lock, &until) != ETIMEDOUT)
    ;
  r = w->done ? w->r : -ETIMEDOUT;
  if (w->done && r >= 0 && out_len)
    memcpy (out, w->bounce, out_len);
  put_locked (w);
  return r;
}
