/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the stop with clients attached (see stop.h).  Order, and
 * why:
 *  1. refuse new connections (a keeper would reconnect to us), and
 *     remove our Unix socket's path so that none arrives at all
 *     (conn-sockets.c says why: nbdkit 1.32 would run a connection
 *     accepted just before its quit in a plugin already unloaded);
 *  2. once the clients are quiet (below), shutdown(SHUT_RD) each client
 *     socket: requests already sent are still read and answered, the
 *     client's later sends fail, so the kernel client requeues them for
 *     the next server instead of getting an error;
 *  3. when every connection has closed (or at the timeout), call
 *     nbdkit_shutdown(): nbdkit's quit would answer ESHUTDOWN to any
 *     request read but not yet handled, so it must come last;
 *  4. nbdkit then calls .cleanup, which saves state= and releases the
 *     backend's lock within what is left of stop-timeout=.
 * The signal handler only writes to a pipe; the thread does the rest.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "clock.h"
#include "conn-sockets.h"
#include "log.h"
#include "stop.h"

/* How often the sockets are scanned again once their reads are shut:
 * one accepted just before the stop began is caught by the next scan.
 */
#define RESCAN_MS 100
/* The interval over which the clients must be seen quiet. */
#define QUIET_MS 5
/* How long a connection nbdkit accepted just before the socket's path
 * went is given to start its thread, which only then counts for the
 * quit (conn-sockets.c); nbdkit creates it at once.
 */
#define ACCEPT_SETTLE_MS 50
#define MAX_CONNECTIONS 64

static const int quit_signals[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP };
#define NSIGNALS (sizeof quit_signals / sizeof quit_signals[0])

struct plugin_stop {
  uint64_t timeout_ms;
  char *ctl;
  int pipe[2];
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* connections changed */
  unsigned connections;
  _Atomic uint64_t requests;    /* requests that reached the plugin */
  bool stopping;
  bool quit_thread;
  uint64_t began_ms;
  struct sigaction saved[NSIGNALS];
};

/* The signal handler's only way to the thread: async-signal-safe. */
static volatile sig_atomic_t signal_pipe = -1;

static void
on_quit_signal (int sig)
{
  char c = 's';
  int saved_errno = errno;

  if (write (signal_pipe, &c, 1) == -1) {
    /* Full: a stop is already on its way. */
  }
  errno = saved_errno;
}

/* Wait up to MS for the connections to change; whether none is left. */
static bool
wait_closed (struct plugin_stop *ps, uint64_t ms)
{
  bool closed;

  pthread_mutex_lock (&ps->lock);
  if (ps->connections > 0 && ms > 0) {
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += ms % 1000 * 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait (&ps->cond, &ps->lock, &ts);
  }
  closed = ps->connections == 0;
  pthread_mutex_unlock (&ps->lock);
  return closed;
}

/* Whether a thread of this process other than the caller is running
 * or waits for a CPU (state R in /proc/self/task/TID/stat).  A worker
 * that has read a request but not yet handed it to the plugin is one:
 * nothing else shows it (the socket is empty, the plugin's count
 * unchanged), and on one CPU this very thread, waking from its
 * QUIET_MS wait, is what preempts it there.  Unreadable: running.
 */
static bool
others_runnable (void)
{
  DIR *d = opendir ("/proc/self/task");
  struct dirent *e;
  long self = syscall (SYS_gettid);
  bool r = false;

  if (d == NULL)
    return true;
  while (!r && (e = readdir (d)) != NULL) {
    char path[32 + sizeof e->d_name], buf[512], *p;
    ssize_t len;
    int fd;

    if (e->d_name[0] == '.' || atol (e->d_name) == self)
      continue;
    snprintf (path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) == -1)
      continue;                 /* gone meanwhile */
    len = read (fd, buf, sizeof buf - 1);
    close (fd);
    buf[len > 0 ? len : 0] = '\0';
    /* The state follows the command name's closing parenthesis. */
    p = strrchr (buf, ')');
    r = p == NULL || p[1] != ' ' || p[2] == 'R';
  }
  closedir (d);
  return r;
}

/* Quiet: nothing waits unread in the sockets, no request reached the
 * plugin since the last look, and no other thread runs.  nbdkit answers
 * ESHUTDOWN to a request it has read but not yet handed to the plugin
 * when another worker reads end-of-file on the same connection (nbdkit
 * 1.32, protocol.c): the reads are shut only when no request can be in
 * that gap, seen quiet twice QUIET_MS apart.  Without the threads'
 * states, a request that arrived between the two looks and was read
 * but not yet dispatched at the second passed for quiet: 2 ESHUTDOWN in
 * about 165 stops under the kernel client at issue 37's counts.
 */
static bool
quiet_now (struct plugin_stop *ps, const int *fds, int n, uint64_t *seen)
{
  uint64_t reqs = atomic_load (&ps->requests);
  bool quiet = conn_sockets_queued (fds, n) == 0 && reqs == *seen &&
               !others_runnable ();

  *seen = reqs;
  return quiet;
}

static void
drain_and_quit (struct plugin_stop *ps)
{
  int fds[MAX_CONNECTIONS];
  uint64_t deadline, give_up_quiet, seen = UINT64_MAX;
  bool was_quiet = false, shut = false;

  pthread_mutex_lock (&ps->lock);
  ps->stopping = true;
  ps->began_ms = monotonic_ms ();
  pthread_mutex_unlock (&ps->lock);
  deadline = ps->began_ms + ps->timeout_ms;
  give_up_quiet = ps->began_ms + ps->timeout_ms / 2;
  conn_sockets_unlink_listeners (ps->ctl);
  nbdkit_debug ("stop: waiting for the clients to be quiet, then ending "
                "their reads");
  while (!wait_closed (ps, shut ? RESCAN_MS : QUIET_MS) &&
         monotonic_ms () < deadline) {
    int n = conn_sockets_find (ps->ctl, fds, MAX_CONNECTIONS);
    bool quiet;

    if (n == -1)
      break;
    quiet = quiet_now (ps, fds, n, &seen);
    if ((quiet && was_quiet) || monotonic_ms () >= give_up_quiet) {
      if (!shut && !(quiet && was_quiet))
        nbdkit_debug ("stop: the clients were never quiet: ending their "
                      "reads anyway");
      conn_sockets_shut_reads (fds, n);
      shut = true;
    }
    was_quiet = quiet;
  }
  if (!wait_closed (ps, 0))
    nbdkit_error ("stop: connections still open after stop-timeout=: "
                  "quitting anyway");
  /* The last connections nbdkit accepts, counted before the quit. */
  while ((conn_sockets_pending (ps->ctl) ||
          monotonic_ms () < ps->began_ms + ACCEPT_SETTLE_MS) &&
         monotonic_ms () < deadline)
    usleep (QUIET_MS * 1000);
  nbdkit_shutdown ();
}

static void *
watch (void *arg)
{
  struct plugin_stop *ps = arg;
  char c;

  for (;;) {
    ssize_t r = read (ps->pipe[0], &c, 1);

    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0 || c == 'q')
      return NULL;
    drain_and_quit (ps);
    return NULL;
  }
}

static int
take_signals (struct plugin_stop *ps)
{
  struct sigaction sa = { .sa_handler = on_quit_signal };

  sigemptyset (&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  signal_pipe = ps->pipe[1];
  for (size_t i = 0; i < NSIGNALS; i++) {
    if (sigaction (quit_signals[i], &sa, &ps->saved[i]) == -1) {
      nbdkit_error ("stop: sigaction: %m");
      return -1;
    }
  }
  return 0;
}

static void
give_signals_back (struct plugin_stop *ps)
{
  for (size_t i = 0; i < NSIGNALS; i++)
    sigaction (quit_signals[i], &ps->saved[i], NULL);
}

struct plugin_stop *
plugin_stop_start (uint64_t timeout_ms, const char *ctl)
{
  struct plugin_stop *ps = calloc (1, sizeof *ps);
  int err;

  if (ps == NULL) {
    nbdkit_error ("stop: out of memory");
    return NULL;
  }
  ps->timeout_ms = timeout_ms;
  ps->pipe[0] = ps->pipe[1] = -1;
  pthread_mutex_init (&ps->lock, NULL);
  pthread_cond_init (&ps->cond, NULL);
  if ((ctl && (ps->ctl = strdup (ctl)) == NULL) ||
      pipe2 (ps->pipe, O_CLOEXEC) == -1) {
    nbdkit_error ("stop: %m");
    goto err;
  }
  fcntl (ps->pipe[1], F_SETFL, O_NONBLOCK);
  if ((err = pthread_create (&ps->thread, NULL, watch, ps)) != 0) {
    errno = err;
    nbdkit_error ("stop: pthread_create: %m");
    goto err;
  }
  if (take_signals (ps) == -1) {
    give_signals_back (ps);
    plugin_stop_free (ps);
    return NULL;
  }
  return ps;

 err:
  close (ps->pipe[0]);
  close (ps->pipe[1]);
  free (ps->ctl);
  free (ps);
  return NULL;
}

void
plugin_stop_opened (struct plugin_stop *ps)
{
  if (ps == NULL)
    return;
  pthread_mutex_lock (&ps->lock);
  ps->connections++;
  pthread_mutex_unlock (&ps->lock);
}

void
plugin_stop_closed (struct plugin_stop *ps)
{
  if (ps == NULL)
    return;
  pthread_mutex_lock (&ps->lock);
  ps->connections--;
  pthread_cond_broadcast (&ps->cond);
  pthread_mutex_unlock (&ps->lock);
}

void
plugin_stop_request (struct plugin_stop *ps)
{
  if (ps)
    atomic_fetch_add_explicit (&ps->requests, 1, memory_order_relaxed);
}

bool
plugin_stop_stopping (struct plugin_stop *ps)
{
  bool r;

  if (ps == NULL)
    return false;
  pthread_mutex_lock (&ps->lock);
  r = ps->stopping;
  pthread_mutex_unlock (&ps->lock);
  return r;
}

uint64_t
plugin_stop_remaining_ms (struct plugin_stop *ps)
{
  uint64_t spent = 0;

  if (ps == NULL)
    return UINT64_MAX;
  pthread_mutex_lock (&ps->lock);
  if (ps->stopping)
    spent = monotonic_ms () - ps->began_ms;
  pthread_mutex_unlock (&ps->lock);
  return spent >= ps->timeout_ms ? 0 : ps->timeout_ms - spent;
}

void
plugin_stop_free (struct plugin_stop *ps)
{
  char c = 'q';

  if (ps == NULL)
    return;
  give_signals_back (ps);
  if (write (ps->pipe[1], &c, 1) == -1) {
    /* The thread reads until 'q' or EOF: closing below ends it too. */
  }
  close (ps->pipe[1]);
  pthread_join (ps->thread, NULL);
  signal_pipe = -1;
  close (ps->pipe[0]);
  pthread_cond_destroy (&ps->cond);
  pthread_mutex_destroy (&ps->lock);
  free (ps->ctl);
  free (ps);
}
