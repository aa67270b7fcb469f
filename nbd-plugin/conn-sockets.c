/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: nbdkit's client connections among our descriptors.  A
 * connection is a socket that does not listen and whose local address
 * is a listening socket's: Linux gives an accepted Unix socket its
 * listener's path, and an accepted TCP socket its listener's port.
 * librbd's connections to Ceph have ephemeral local ports; the control
 * socket's clients are left alone by its path.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn-sockets.h"
#include "log.h"

#define MAX_LISTENERS 16

struct addr {
  struct sockaddr_storage ss;
  socklen_t len;
};

static bool
local_addr (int fd, struct addr *a)
{
  a->len = sizeof a->ss;
  return getsockname (fd, (struct sockaddr *) &a->ss, &a->len) == 0;
}

static bool
is_listening (int fd, bool *listening)
{
  int v = 0;
  socklen_t len = sizeof v;

  if (getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) == -1)
    return false;             /* not a socket */
  *listening = v != 0;
  return true;
}

static int
port_of (const struct addr *a)
{
  if (a->ss.ss_family == AF_INET)
    return ((const struct sockaddr_in *) &a->ss)->sin_port;
  return ((const struct sockaddr_in6 *) &a->ss)->sin6_port;
}

static bool
same_endpoint (const struct addr *a, const struct addr *l)
{
  if (a->ss.ss_family != l->ss.ss_family)
    return false;
  if (a->ss.ss_family == AF_INET || a->ss.ss_family == AF_INET6)
    return port_of (a) == port_of (l);
  /* Unix: the path, bytes and length (an unnamed socket matches none). */
  return a->len == l->len && a->len > sizeof (sa_family_t) &&
         memcmp (&a->ss, &l->ss, a->len) == 0;
}

static bool
is_excluded (const struct addr *a, const char *exclude)
{
  const struct sockaddr_un *sun = (const struct sockaddr_un *) &a->ss;

  return exclude && a->ss.ss_family == AF_UNIX &&
         strncmp (sun->sun_path, exclude, sizeof sun->sun_path) == 0;
}

/* Each descriptor of /proc/self/fd that is a socket, to FN. */
static int
each_socket (void (*fn) (int fd, bool listening, void *opaque), void *opaque)
{
  DIR *d = opendir ("/proc/self/fd");
  struct dirent *e;

  if (d == NULL) {
    dc_error ("stop: /proc/self/fd: %m");
    return -1;
  }
  while ((e = readdir (d)) != NULL) {
    int fd = atoi (e->d_name);
    bool listening;

    if (e->d_name[0] != '.' && fd != dirfd (d) && is_listening (fd, &listening))
      fn (fd, listening, opaque);
  }
  closedir (d);
  return 0;
}

struct scan {
  const char *exclude;
  struct addr listeners[MAX_LISTENERS];
  int nlisteners;
  int *fds;
  int nfds, max;
};

static void
collect_listener (int fd, bool listening, void *opaque)
{
  struct scan *s = opaque;
  struct addr *a = &s->listeners[s->nlisteners];

  if (listening && s->nlisteners < MAX_LISTENERS && local_addr (fd, a) &&
      !is_excluded (a, s->exclude))
    s->nlisteners++;
}

static void
collect_connection (int fd, bool listening, void *opaque)
{
  struct scan *s = opaque;
  struct addr a;

  if (listening || s->nfds >= s->max || !local_addr (fd, &a))
    return;
  for (int i = 0; i < s->nlisteners; i++) {
    if (same_endpoint (&a, &s->listeners[i])) {
      s->fds[s->nfds++] = fd;
      return;
    }
  }
}

int
conn_sockets_find (const char *exclude, int *fds, int max)
{
  struct scan s = { .exclude = exclude, .fds = fds, .max = max };

  if (each_socket (collect_listener, &s) == -1 ||
      each_socket (collect_connection, &s) == -1)
    return -1;
  return s.nfds;
}

int
conn_sockets_queued (const int *fds, int n)
{
  int total = 0;

  for (int i = 0; i < n; i++) {
    int q = 0;

    if (ioctl (fds[i], SIOCINQ, &q) == 0)
      total += q;
  }
  return total;
}

/* The peer's further sends now fail (EPIPE on a Unix socket): the
 * kernel client requeues those requests for a reconnect, while what is
 * already queued here is still read and answered; then nbdkit reads
 * end-of-file and closes the connection.
 */
void
conn_sockets_shut_reads (const int *fds, int n)
{
  for (int i = 0; i < n; i++)
    shutdown (fds[i], SHUT_RD);
}

/* nbdkit 1.32 counts a connection's thread only once that thread runs
 * (server/sockets.c: count++ in start_thread), and after nbdkit_shutdown
 * waits only for the counted ones before it unloads the plugin.  A
 * connection accepted just before the quit (a keeper retrying every
 * 100 ms does that) then calls .preconnect in a plugin already
 * unloaded: seen as a SIGSEGV in about one stop in ten in the guest.
 * Without the path nobody can connect any more (a keeper's connect gets
 * ENOENT and it tries again, as it does for a refusal), and nbdkit's
 * poll never wakes for a listener again.  Relative paths are left: a
 * daemonized nbdkit has changed directory since it bound them.
 */
static void
unlink_listener (int fd, bool listening, void *opaque)
{
  struct scan *s = opaque;
  struct addr a;
  const struct sockaddr_un *sun = (const struct sockaddr_un *) &a.ss;

  if (!listening || !local_addr (fd, &a) || a.ss.ss_family != AF_UNIX ||
      a.len <= sizeof (sa_family_t) || sun->sun_path[0] != '/' ||
      is_excluded (&a, s->exclude))
    return;
  if (unlink (sun->sun_path) == 0) {
    dc_debug ("stop: removed %s: no new connections", sun->sun_path);
    s->nfds++;
  }
}

int
conn_sockets_unlink_listeners (const char *exclude)
{
  struct scan s = { .exclude = exclude };

  each_socket (unlink_listener, &s);
  return s.nfds;
}

static void
note_pending (int fd, bool listening, void *opaque)
{
  struct scan *s = opaque;
  struct addr a;
  struct pollfd p = { .fd = fd, .events = POLLIN };

  if (listening && local_addr (fd, &a) && !is_excluded (&a, s->exclude) &&
      poll (&p, 1, 0) == 1 && (p.revents & POLLIN))
    s->nfds++;
}

bool
conn_sockets_pending (const char *exclude)
{
  struct scan s = { .exclude = exclude };

  each_socket (note_pending, &s);
  return s.nfds > 0;
}
