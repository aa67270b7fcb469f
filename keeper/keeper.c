/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the keeper.  It connects /dev/nbdN over netlink with a
 * dead-connection timeout, so that when the server's process goes away
 * the kernel holds I/O instead of failing it; the keeper hears the
 * link-dead events, connects to whatever server listens on the same
 * path next, and gives the device the new sockets (NBD_CMD_RECONFIGURE,
 * one per dead connection).  The kernel answers a reconfigure with no
 * dead connection to replace with success all the same (nbd.c turns
 * its -ENOSPC into 0), so the keeper counts the link-dead events: one
 * per connection that dies, each answered by one new socket.  It
 * holds no state the device needs: killing it only loses the reconnect.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keeper.h"
#include "log.h"
#include "nbd-handshake.h"
#include "nbd-netlink.h"

#define NBD_FLAG_CAN_MULTI_CONN (1 << 8)
/* How often a missing server is tried again while I/O is held. */
#define RETRY_MS 100
#define MAX_CONNECTIONS 16

struct keeper {
  const struct keeper_options *o;
  struct nbd_nl *nl;
  uint32_t index;
  struct nbd_export_info info;
  int sigfd;
  int dead;                    /* connections the kernel said died */
  uint64_t reconnects;
};

/* The pidfile's directory: /run/discardcache, or
 * $DISCARDCACHE_KEEPER_DIR (tests).
 */
static int
pidfile_path (uint32_t index, char *buf, size_t len)
{
  const char *dir = getenv ("DISCARDCACHE_KEEPER_DIR");

  if (dir == NULL || *dir == '\0')
    dir = "/run/discardcache";
  if (mkdir (dir, 0755) == -1 && errno != EEXIST) {
    dc_error ("%s: %m", dir);
    return -1;
  }
  snprintf (buf, len, "%s/nbd%" PRIu32 ".keeper.pid", dir, index);
  return 0;
}

static int
write_pidfile (uint32_t index, pid_t pid)
{
  char path[4096];
  FILE *fp;

  if (pidfile_path (index, path, sizeof path) == -1)
    return -1;
  fp = fopen (path, "we");
  if (fp == NULL || fprintf (fp, "%ld\n", (long) pid) < 0 || fclose (fp)) {
    dc_error ("%s: %m", path);
    return -1;
  }
  return 0;
}

/* The kernel wants a power of two from 512 to the page size; the
 * server's minimum, when it is one, else 512.
 */
static uint64_t
block_size (const struct nbd_export_info *info)
{
  uint32_t b = info->min_block;

  if (b < 512 || b > 4096 || (b & (b - 1)))
    return 512;
  return b;
}

static void
close_all (int *fds, int n)
{
  for (int i = 0; i < n; i++)
    close (fds[i]);
}

static int
connect_device (struct keeper *k)
{
  const struct keeper_options *o = k->o;
  int fds[MAX_CONNECTIONS];
  struct nbd_export_info other;
  struct nbd_nl_config c;
  int r = -1, n = 0;

  for (; n < o->connections; n++) {
    fds[n] = nbd_handshake_unix (o->socket, n ? &other : &k->info, 0);
    if (fds[n] == -1)
      goto out;
  }
  if (o->connections > 1 && !(k->info.flags & NBD_FLAG_CAN_MULTI_CONN)) {
    dc_error ("%s: the server does not allow multi-conn: use "
              "--connections=1", o->socket);
    goto out;
  }
  c = (struct nbd_nl_config) {
    .index = k->index, .size = k->info.size,
    .block_size = block_size (&k->info), .server_flags = k->info.flags,
    .dead_timeout_s = (o->dead_timeout_ms + 999) / 1000,
    .fds = fds, .nfds = n,
  };
  r = nbd_nl_connect (k->nl, &c);
  /* --adopt: a device connected before (by a keeper that died) is
   * kept as it is.  Any of its connections may be dead already, with
   * their events gone: each is offered a socket once (the kernel drops
   * those it has no dead slot for).
   */
  if (r == -1 && errno == EBUSY && o->adopt) {
    dc_debug ("nbd%" PRIu32 ": connected already: adopted", k->index);
    k->dead = o->connections;
    r = 0;
  }
  else if (r == -1 && errno == EBUSY)
    dc_error ("%s is connected already (--adopt keeps it as it is)",
              o->device);
 out:
  /* The kernel holds its own references to the sockets. */
  close_all (fds, n);
  return r;
}

/* One dead connection replaced: 0, or -1 when the server is not there
 * (yet) or the kernel refused.
 */
static int
replace_one (struct keeper *k)
{
  struct nbd_export_info info;
  int fd = nbd_handshake_unix (k->o->socket, &info, 1);
  int r;

  if (fd == -1)
    return -1;
  if (info.size != k->info.size) {
    dc_error ("%s: the new server's size %" PRIu64 " is not the device's "
              "%" PRIu64 ": not reconnecting", k->o->socket, info.size,
              k->info.size);
    close (fd);
    return -1;
  }
  r = nbd_nl_reconfigure (k->nl, k->index, &fd, 1);
  close (fd);
  if (r == -1)
    return -1;
  k->reconnects++;
  dc_debug ("nbd%" PRIu32 ": a connection replaced (%" PRIu64 " so far)",
            k->index, k->reconnects);
  return 0;
}

static void
reconnect (struct keeper *k)
{
  while (k->dead > 0 && replace_one (k) == 0)
    k->dead--;
}

static int
block_signals (struct keeper *k)
{
  sigset_t set;

  sigemptyset (&set);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGHUP);
  if (sigprocmask (SIG_BLOCK, &set, NULL) == -1 ||
      (k->sigfd = signalfd (-1, &set, SFD_CLOEXEC)) == -1) {
    dc_error ("keeper: signals: %m");
    return -1;
  }
  signal (SIGPIPE, SIG_IGN);
  return 0;
}

/* Until SIGTERM, SIGINT or SIGHUP: the device stays connected. */
static int
keep (struct keeper *k)
{
  struct pollfd p[2] = {
    { .fd = k->sigfd, .events = POLLIN },
    { .fd = nbd_nl_event_fd (k->nl), .events = POLLIN },
  };

  for (;;) {
    int n = poll (p, 2, k->dead > 0 ? RETRY_MS : -1);

    if (n == -1 && errno != EINTR) {
      dc_error ("keeper: poll: %m");
      return -1;
    }
    if (p[0].revents)
      return 0;
    if (p[1].revents) {
      n = nbd_nl_read_events (k->nl, k->index);
      if (n == -1)
        return -1;
      k->dead += n;
      if (k->dead > k->o->connections)
        k->dead = k->o->connections;
    }
    reconnect (k);
  }
}

static int
redirect_stdio (const char *log)
{
  int null = open ("/dev/null", O_RDWR | O_CLOEXEC);
  int err = log ? open (log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)
                : null;

  if (null == -1 || err == -1) {
    dc_error ("keeper: %s: %m", log ? log : "/dev/null");
    return -1;
  }
  dup2 (null, 0);
  dup2 (null, 1);
  dup2 (err, 2);
  close (null);
  if (err != null)
    close (err);
  return 0;
}

/* The parent writes the pidfile and returns; the child keeps. */
static int
daemonise (struct keeper *k)
{
  pid_t pid;

  if (redirect_stdio (k->o->log) == -1)
    return -1;
  pid = fork ();
  if (pid == -1) {
    dc_error ("keeper: fork: %m");
    return -1;
  }
  if (pid > 0)
    _exit (write_pidfile (k->index, pid) == 0 ? 0 : 1);
  setsid ();
  return 0;
}

static pid_t read_pidfile (const char *path);

/* Only our own: a keeper started since may have written its pid. */
static void
remove_own_pidfile (uint32_t index)
{
  char path[4096];

  if (pidfile_path (index, path, sizeof path) == 0 &&
      read_pidfile (path) == getpid ())
    unlink (path);
}

int
keeper_attach (const struct keeper_options *o)
{
  struct keeper k = { .o = o, .sigfd = -1 };
  int r = -1;

  if (o->connections < 1 || o->connections > MAX_CONNECTIONS) {
    dc_error ("--connections: from 1 to %d", MAX_CONNECTIONS);
    return -1;
  }
  if (nbd_nl_parse_device (o->device, &k.index) == -1 ||
      (k.nl = nbd_nl_open (1)) == NULL)
    return -1;
  /* Signals blocked before the device is connected: a stop between the
   * two is not lost.
   */
  if (block_signals (&k) == -1 || connect_device (&k) == -1)
    goto out;
  if (!o->foreground) {
    fflush (stdout);
    if (daemonise (&k) == -1)
      goto out;
  }
  else if (write_pidfile (k.index, getpid ()) == -1)
    goto out;
  r = keep (&k);
  remove_own_pidfile (k.index);
 out:
  if (k.sigfd >= 0)
    close (k.sigfd);
  nbd_nl_close (k.nl);
  return r;
}

static pid_t
read_pidfile (const char *path)
{
  FILE *fp = fopen (path, "re");
  long pid = 0;

  if (fp == NULL)
    return 0;
  if (fscanf (fp, "%ld", &pid) != 1)
    pid = 0;
  fclose (fp);
  return pid;
}

/* Whether PID is gone (or a zombie nobody reaped yet). */
static bool
gone (pid_t pid)
{
  char path[64], state = 0;
  FILE *fp;

  if (kill (pid, 0) == -1)
    return true;
  snprintf (path, sizeof path, "/proc/%ld/stat", (long) pid);
  fp = fopen (path, "re");
  if (fp == NULL)
    return true;
  if (fscanf (fp, "%*d (%*[^)]) %c", &state) != 1)
    state = 0;
  fclose (fp);
  return state == 'Z';
}

/* The keeper's SIGTERM and its exit, before the disconnect: a keeper
 * still running would take the disconnect's dead sockets for a
 * restart.
 */
static void
stop_keeper (pid_t pid)
{
  if (kill (pid, SIGTERM) == -1) {
    if (errno != ESRCH)
      dc_error ("keeper %ld: %m", (long) pid);
    return;
  }
  for (int i = 0; i < 500 && !gone (pid); i++)
    usleep (10000);
}

int
keeper_detach (const char *device)
{
  char path[4096];
  uint32_t index;
  struct nbd_nl *nl;
  pid_t pid;
  int r;

  if (nbd_nl_parse_device (device, &index) == -1 ||
      (nl = nbd_nl_open (0)) == NULL)
    return -1;
  /* The keeper first, so that it does not hand the device new
   * connections while it goes.
   */
  if (pidfile_path (index, path, sizeof path) == 0 &&
      (pid = read_pidfile (path)) > 0) {
    stop_keeper (pid);
    unlink (path);
  }
  r = nbd_nl_disconnect (nl, index);
  nbd_nl_close (nl);
  return r;
}
