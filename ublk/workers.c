/* SPDX-License-Identifier: BSD-3-Clause */
/* discardublk: a queue's workers.  The queue's thread must be the one
 * that answers the kernel (ublk binds a queue to the task that fetched
 * its requests), but a backend that takes a millisecond a request (NBD,
 * RBD) would then serve one request at a time.  So the queue thread
 * hands each request's tag to these threads, which call the volume; a
 * finished tag goes on the done list and the eventfd wakes the queue
 * thread, whose ring polls it, to commit the answers.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "discardublk.h"
#include "log.h"

struct dublk_workers {
  struct dublk_queue *q;
  unsigned depth;
  pthread_t *threads;
  unsigned started;
  pthread_mutex_t lock;
  pthread_cond_t cond;             /* work, or stop */
  unsigned *todo;                  /* ring of tags to serve */
  unsigned todo_head, todo_count;
  unsigned *done;                  /* tags served, not yet taken */
  int *done_result;
  unsigned done_count;
  bool stop;
  int efd;
};

/* Next tag to serve, or false to stop. */
static bool
next_tag (struct dublk_workers *w, unsigned *tag)
{
  bool go;

  pthread_mutex_lock (&w->lock);
  while (!w->stop && w->todo_count == 0)
    pthread_cond_wait (&w->cond, &w->lock);
  go = !w->stop;
  if (go) {
    *tag = w->todo[w->todo_head];
    w->todo_head = (w->todo_head + 1) % w->depth;
    w->todo_count--;
  }
  pthread_mutex_unlock (&w->lock);
  return go;
}

static void
finish_tag (struct dublk_workers *w, unsigned tag, int result)
{
  uint64_t one = 1;

  pthread_mutex_lock (&w->lock);
  w->done[w->done_count] = tag;
  w->done_result[w->done_count] = result;
  w->done_count++;
  pthread_mutex_unlock (&w->lock);
  if (write (w->efd, &one, sizeof one) != sizeof one)
    dc_error ("ublk queue %u: eventfd: %m", w->q->id);
}

static void *
worker (void *arg)
{
  struct dublk_workers *w = arg;
  struct dublk_queue *q = w->q;
  unsigned tag;

  while (next_tag (w, &tag))
    finish_tag (w, tag, dublk_io (q->d->volume, &q->iods[tag],
                                  dublk_queue_buf (q, tag)));
  return NULL;
}

static struct dublk_workers *
workers_alloc (struct dublk_queue *q)
{
  struct dublk_workers *w = calloc (1, sizeof *w);
  unsigned depth = q->d->info.queue_depth;

  if (w == NULL)
    return NULL;
  w->q = q;
  w->depth = depth;
  w->efd = -1;
  w->threads = calloc (q->d->nr_workers, sizeof *w->threads);
  w->todo = calloc (depth, sizeof *w->todo);
  w->done = calloc (depth, sizeof *w->done);
  w->done_result = calloc (depth, sizeof *w->done_result);
  pthread_mutex_init (&w->lock, NULL);
  pthread_cond_init (&w->cond, NULL);
  return w;
}

struct dublk_workers *
dublk_workers_start (struct dublk_queue *q)
{
  struct dublk_workers *w = workers_alloc (q);
  int err;

  if (w == NULL || !w->threads || !w->todo || !w->done || !w->done_result) {
    dc_error ("ublk queue %u: workers: %m", q->id);
    dublk_workers_stop (w);
    return NULL;
  }
  w->efd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->efd == -1) {
    dc_error ("ublk queue %u: eventfd: %m", q->id);
    dublk_workers_stop (w);
    return NULL;
  }
  for (; w->started < q->d->nr_workers; w->started++) {
    err = pthread_create (&w->threads[w->started], NULL, worker, w);
    if (err) {
      errno = err;
      dc_error ("ublk queue %u: pthread_create: %m", q->id);
      dublk_workers_stop (w);
      return NULL;
    }
  }
  return w;
}

int
dublk_workers_fd (const struct dublk_workers *w)
{
  return w->efd;
}

void
dublk_workers_submit (struct dublk_workers *w, unsigned tag)
{
  pthread_mutex_lock (&w->lock);
  w->todo[(w->todo_head + w->todo_count) % w->depth] = tag;
  w->todo_count++;
  pthread_cond_signal (&w->cond);
  pthread_mutex_unlock (&w->lock);
}

unsigned
dublk_workers_take (struct dublk_workers *w, unsigned *tags, int *results)
{
  uint64_t v;
  unsigned i, n;

  /* Reset the eventfd first: a tag finished after this wakes us again. */
  if (read (w->efd, &v, sizeof v) == -1 && errno != EAGAIN)
    dc_error ("ublk queue %u: eventfd: %m", w->q->id);
  pthread_mutex_lock (&w->lock);
  n = w->done_count;
  for (i = 0; i < n; i++) {
    tags[i] = w->done[i];
    results[i] = w->done_result[i];
  }
  w->done_count = 0;
  pthread_mutex_unlock (&w->lock);
  return n;
}

/* Requests still being served finish; those not started are left: their
 * tags are never answered, which with user recovery the kernel reissues
 * to the next server.
 */
void
dublk_workers_stop (struct dublk_workers *w)
{
  unsigned i;

  if (w == NULL)
    return;
  pthread_mutex_lock (&w->lock);
  w->stop = true;
  pthread_cond_broadcast (&w->cond);
  pthread_mutex_unlock (&w->lock);
  for (i = 0; i < w->started; i++)
    pthread_join (w->threads[i], NULL);
  if (w->efd >= 0)
    close (w->efd);
  pthread_mutex_destroy (&w->lock);
  pthread_cond_destroy (&w->cond);
  free (w->threads);
  free (w->todo);
  free (w->done);
  free (w->done_result);
  free (w);
}
