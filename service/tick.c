/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the service's timer (see tick.h). */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "tick.h"

struct service_tick {
  struct volume *volume;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t stop_cond;         /* on CLOCK_MONOTONIC */
  bool stopping;                    /* under lock */
};

static void *
tick_thread (void *opaque)
{
  struct service_tick *t = opaque;

  pthread_mutex_lock (&t->lock);
  while (!t->stopping) {
    struct timespec at = deadline_after_ns (TICK_MS * UINT64_C (1000000));

    pthread_cond_timedwait (&t->stop_cond, &t->lock, &at);
    if (t->stopping)
      break;
    pthread_mutex_unlock (&t->lock);
    volume_tick (t->volume);        /* reports its own errors */
    pthread_mutex_lock (&t->lock);
  }
  pthread_mutex_unlock (&t->lock);
  return NULL;
}

struct service_tick *
tick_start (struct volume *v)
{
  struct service_tick *t = calloc (1, sizeof *t);
  int err;

  if (t == NULL) {
    dc_error ("tick: calloc: %m");
    return NULL;
  }
  t->volume = v;
  pthread_mutex_init (&t->lock, NULL);
  monotonic_cond_init (&t->stop_cond);
  err = pthread_create (&t->thread, NULL, tick_thread, t);
  if (err) {
    errno = err;
    dc_error ("tick: cannot start its thread: %m");
    pthread_cond_destroy (&t->stop_cond);
    pthread_mutex_destroy (&t->lock);
    free (t);
    errno = err;
    return NULL;
  }
  return t;
}

void
tick_stop (struct service_tick *t)
{
  if (t == NULL)
    return;
  pthread_mutex_lock (&t->lock);
  t->stopping = true;
  pthread_cond_signal (&t->stop_cond);
  pthread_mutex_unlock (&t->lock);
  pthread_join (t->thread, NULL);
  pthread_cond_destroy (&t->stop_cond);
  pthread_mutex_destroy (&t->lock);
  free (t);
}
