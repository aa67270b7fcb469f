/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache verifier: commands beside the I/O (see runcmd.h). */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "runcmd.h"

struct cmd_runner {
  char *const *cmds;
  size_t n;
  unsigned interval_ms;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t stop_cond;
  bool stop;
  unsigned runs, failures;      /* under lock */
};

int
run_cmd (const char *cmd)
{
  int status = system (cmd);

  if (status == -1) {
    fprintf (stderr, "verify: cannot run %s: %s\n", cmd, strerror (errno));
    return -1;
  }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
    fprintf (stderr, "verify: command failed (status 0x%x): %s\n", status, cmd);
    return -1;
  }
  return 0;
}

/* Sleep interval_ms unless stopped first; true if stopped. */
static bool
wait_or_stop (struct cmd_runner *r)
{
  struct timespec ts;
  bool stop;

  clock_gettime (CLOCK_REALTIME, &ts);
  ts.tv_sec += r->interval_ms / 1000;
  ts.tv_nsec += (long) (r->interval_ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock (&r->lock);
  while (!r->stop &&
         pthread_cond_timedwait (&r->stop_cond, &r->lock, &ts) != ETIMEDOUT)
    ;
  stop = r->stop;
  pthread_mutex_unlock (&r->lock);
  return stop;
}

static void *
runner_thread (void *opaque)
{
  struct cmd_runner *r = opaque;
  size_t next = 0;

  while (!wait_or_stop (r)) {
    int failed = run_cmd (r->cmds[next]) == -1;

    next = (next + 1) % r->n;
    pthread_mutex_lock (&r->lock);
    r->runs++;
    r->failures += failed;
    pthread_mutex_unlock (&r->lock);
  }
  return NULL;
}

struct cmd_runner *
cmd_runner_start (char *const *cmds, size_t n, unsigned interval_ms)
{
  struct cmd_runner *r = calloc (1, sizeof *r);
  int err;

  if (r == NULL) {
    perror ("calloc");
    return NULL;
  }
  r->cmds = cmds;
  r->n = n;
  r->interval_ms = interval_ms;
  pthread_mutex_init (&r->lock, NULL);
  pthread_cond_init (&r->stop_cond, NULL);
  err = pthread_create (&r->thread, NULL, runner_thread, r);
  if (err) {
    fprintf (stderr, "verify: pthread_create: %s\n", strerror (err));
    free (r);
    return NULL;
  }
  return r;
}

unsigned
cmd_runner_stop (struct cmd_runner *r, unsigned *runs)
{
  unsigned failures;

  *runs = 0;
  if (r == NULL)
    return 0;
  pthread_mutex_lock (&r->lock);
  r->stop = true;
  pthread_cond_signal (&r->stop_cond);
  pthread_mutex_unlock (&r->lock);
  pthread_join (r->thread, NULL);
  *runs = r->runs;
  failures = r->failures;
  pthread_cond_destroy (&r->stop_cond);
  pthread_mutex_destroy (&r->lock);
  free (r);
  return failures;
}
