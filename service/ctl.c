/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the control socket server (see ctl.h): the socket, the
 * listener and the client threads.  The commands are in ctl-commands.c.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl-internal.h"
#include "ctl-proto.h"
#include "ctl.h"
#include "log.h"

/* A client that sends nothing for this long is disconnected. */
#define IDLE_TIMEOUT_MS 60000
/* A client that reads nothing of a reply for this long is disconnected. */
#define WRITE_TIMEOUT_MS 10000
/* After accept fails for want of descriptors, wait before retrying. */
#define ACCEPT_BACKOFF_MS 100

/* Wait for events on the client's socket: 1 ready, 0 timed out, -1 when
 * the server is stopping.
 */
static int
wait_client (struct ctl_client *c, short events, int timeout_ms)
{
  struct pollfd p[2] = {
    { .fd = c->fd, .events = events },
    { .fd = c->s->stop_pipe[0], .events = POLLIN },
  };
  int r;

  do
    r = poll (p, 2, timeout_ms);
  while (r == -1 && errno == EINTR);
  if (r == -1 || p[1].revents)
    return -1;
  return r > 0;
}

bool
ctl_stopping (const struct ctl_server *s)
{
  return atomic_load (&s->stopping);
}

bool
ctl_client_gone (struct ctl_client *c)
{
  struct pollfd p = { .fd = c->fd, .events = POLLRDHUP };

  return poll (&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

int
ctl_send (struct ctl_client *c, const char *buf, size_t len)
{
  while (len > 0) {
    ssize_t n = send (c->fd, buf, len, MSG_NOSIGNAL);

    if (n > 0) {
      buf += n;
      len -= n;
    }
    else if (n == -1 && errno == EINTR)
      continue;
    else if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_client (c, POLLOUT, WRITE_TIMEOUT_MS) != 1) {
        dc_debug ("ctl: client not reading for %d ms or server stopping: "
                  "disconnected", WRITE_TIMEOUT_MS);
        return -1;
      }
    }
    else
      return -1;
  }
  return 0;
}

/* The lines of one reply collect in a memory stream, sent in one go. */
FILE *
ctl_out_open (struct ctl_client *c)
{
  c->out = open_memstream (&c->out_buf, &c->out_len);
  if (c->out == NULL)
    dc_error ("ctl: open_memstream: %m");
  return c->out;
}

int
ctl_out_send (struct ctl_client *c)
{
  int r = -1;

  if (fclose (c->out) == 0)
    r = ctl_send (c, c->out_buf, c->out_len);
  free (c->out_buf);
  c->out = NULL;
  c->out_buf = NULL;
  return r;
}

int
ctl_send_error (struct ctl_client *c, const char *msg)
{
  FILE *fp = ctl_out_open (c);

  if (fp == NULL)
    return -1;
  ctl_json_error (fp, msg);
  return ctl_out_send (c);
}

/* Read the next request line into *line: 1, or 0 when the client is
 * gone (closed, half a line included; idle; too long a line).
 */
static int
read_line (struct ctl_client *c, char **line, size_t *len)
{
  char msg[128];

  for (;;) {
    size_t room;
    char *p;
    ssize_t n;
    int r = ctl_linebuf_next (&c->lb, line, len);

    if (r == 1)
      return 1;
    if (r == -1) {
      snprintf (msg, sizeof msg, "request line longer than %d bytes: closing "
                "the connection", CTL_MAX_LINE);
      ctl_send_error (c, msg);
      return 0;
    }
    p = ctl_linebuf_space (&c->lb, &room);
    r = wait_client (c, POLLIN, IDLE_TIMEOUT_MS);
    if (r == 0) {
      snprintf (msg, sizeof msg, "no request for %d s: closing the "
                "connection", IDLE_TIMEOUT_MS / 1000);
      ctl_send_error (c, msg);
    }
    if (r != 1)
      return 0;
    n = recv (c->fd, p, room, 0);
    if (n == -1 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (n <= 0)
      return 0;
    ctl_linebuf_added (&c->lb, n);
  }
}

static void *
client_thread (void *arg)
{
  struct ctl_client *c = arg;
  char *line;
  size_t len;

  if (ctl_hello (c) == 0)
    while (!ctl_stopping (c->s) && read_line (c, &line, &len) == 1 &&
           ctl_handle_line (c, line, len) == 0)
      ;
  close (c->fd);
  c->fd = -1;
  atomic_store (&c->done, true);
  return NULL;
}

/* Join the threads of clients that have gone. */
static void
reap (struct ctl_server *s)
{
  for (int i = 0; i < CTL_MAX_CLIENTS; i++) {
    struct ctl_client *c = &s->clients[i];

    if (c->used && atomic_load (&c->done)) {
      pthread_join (c->thread, NULL);
      c->used = false;
    }
  }
}

/* Best effort, on a fresh non-blocking socket: a refusal or "busy". */
static void
refuse (int fd, const char *msg)
{
  char buf[512];
  FILE *fp = fmemopen (buf, sizeof buf, "w");
  long n = -1;

  if (fp) {
    ctl_json_error (fp, msg);
    n = ferror (fp) ? -1 : ftell (fp);
    fclose (fp);
  }
  if (n <= 0 || send (fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) == -1)
    dc_debug ("ctl: could not tell a refused client why: %m");
  close (fd);
}

/* Invariant 6: only root and the server's own user. */
static bool
peer_allowed (struct ctl_server *s, int fd)
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  char msg[256];

  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
    dc_error ("ctl %s: SO_PEERCRED: %m: connection refused", s->path);
    refuse (fd, "permission denied: cannot check your credentials");
    return false;
  }
  if (cred.uid == 0 || cred.uid == geteuid ())
    return true;
  dc_error ("ctl %s: refused pid %d uid %u: only root and uid %u may control "
            "this server", s->path, (int) cred.pid, (unsigned) cred.uid,
            (unsigned) geteuid ());
  snprintf (msg, sizeof msg, "permission denied: uid %u is neither root nor "
            "the server's uid %u", (unsigned) cred.uid, (unsigned) geteuid ());
  refuse (fd, msg);
  return false;
}

static void
start_client (struct ctl_server *s, int fd)
{
  struct ctl_client *c = NULL;
  int err;

  reap (s);
  for (int i = 0; i < CTL_MAX_CLIENTS && c == NULL; i++)
    if (!s->clients[i].used)
      c = &s->clients[i];
  if (c == NULL) {
    dc_debug ("ctl: %d clients connected, refusing another", CTL_MAX_CLIENTS);
    refuse (fd, "busy: too many clients connected, try again later");
    return;
  }
  memset (&c->lb, 0, sizeof c->lb);
  c->s = s;
  c->fd = fd;
  atomic_store (&c->done, false);
  err = pthread_create (&c->thread, NULL, client_thread, c);
  if (err) {
    errno = err;
    dc_error ("ctl: cannot start a client thread: %m");
    refuse (fd, "busy: the server cannot start a thread, try again later");
    return;
  }
  c->used = true;
}

static void
accept_one (struct ctl_server *s)
{
  int fd = accept4 (s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

  if (fd == -1) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
        errno == ENOMEM) {
      dc_error ("ctl %s: accept: %m", s->path);
      poll (&(struct pollfd) { .fd = s->stop_pipe[0], .events = POLLIN }, 1,
            ACCEPT_BACKOFF_MS);
    }
    return;
  }
  if (peer_allowed (s, fd))
    start_client (s, fd);
}

static void *
listener_thread (void *arg)
{
  struct ctl_server *s = arg;

  for (;;) {
    struct pollfd p[2] = {
      { .fd = s->listen_fd, .events = POLLIN },
      { .fd = s->stop_pipe[0], .events = POLLIN },
    };

    if (poll (p, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      dc_error ("ctl %s: poll: %m: no longer serving", s->path);
      return NULL;
    }
    if (p[1].revents)
      return NULL;
    if (p[0].revents & POLLIN)
      accept_one (s);
  }
}

/* The default socket's path in the default directory, for pid. */
static int
default_path_for (char *path, size_t n, pid_t pid)
{
  char dir[sizeof ((struct sockaddr_un *) 0)->sun_path];

  if (ctl_default_dir (dir, sizeof dir) == -1 ||
      snprintf (path, n, "%s/%d.sock", dir, (int) pid) >= (int) n) {
    dc_error ("ctl: the default socket directory is too long a path: set "
              "ctl=PATH or XDG_RUNTIME_DIR");
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}

/* The default directory is private: created 0700, and if it exists it
 * must be ours and not writable by anyone else.
 */
static int
default_path (struct ctl_server *s)
{
  char dir[sizeof s->path];
  struct stat st;

  if (default_path_for (s->path, sizeof s->path, s->pid) == -1 ||
      ctl_default_dir (dir, sizeof dir) == -1)
    return -1;
  if (mkdir (dir, 0700) == -1 && errno != EEXIST) {
    dc_error ("ctl: cannot create %s: %m (set ctl=PATH or ctl=none)", dir);
    return -1;
  }
  if (lstat (dir, &st) == -1 || !S_ISDIR (st.st_mode) ||
      st.st_uid != geteuid () || (st.st_mode & 022)) {
    dc_error ("ctl: %s is not a directory owned by uid %u and writable only "
              "by it (set ctl=PATH or ctl=none)", dir, (unsigned) geteuid ());
    errno = EPERM;
    return -1;
  }
  s->default_path = true;
  return 0;
}

/* The process forked since the socket was bound at the parent's
 * PID.sock: rename it to ours, so that discardctl's list names the
 * server that answers.  A rename keeps the bound socket (it is the same
 * inode); a client that connected meanwhile reached this server anyway.
 * On failure the socket keeps serving at the old name.
 */
static void
rename_to_pid (struct ctl_server *s)
{
  char path[sizeof s->path];

  if (default_path_for (path, sizeof path, getpid ()) == -1)
    return;
  if (rename (s->path, path) == -1) {
    dc_error ("ctl: cannot rename %s to %s after the fork: %m: serving at "
              "the old name", s->path, path);
    return;
  }
  memcpy (s->path, path, sizeof path);
  s->pid = getpid ();
}

static int
bind_path (int fd, const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };

  snprintf (sun.sun_path, sizeof sun.sun_path, "%s", path);
  return bind (fd, (struct sockaddr *) &sun, sizeof sun);
}

/* A socket file nobody listens on is left by a server that was killed:
 * remove it.  Anything else at path stays.
 */
static int
remove_stale (const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  struct stat st;
  int fd, r;

  if (lstat (path, &st) == -1 || !S_ISSOCK (st.st_mode)) {
    dc_error ("ctl=%s: exists and is not a socket: expected a path where the "
              "control socket can be created", path);
    errno = EEXIST;
    return -1;
  }
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return -1;
  snprintf (sun.sun_path, sizeof sun.sun_path, "%s", path);
  r = connect (fd, (struct sockaddr *) &sun, sizeof sun);
  close (fd);
  if (r == 0 || errno != ECONNREFUSED) {
    dc_error ("ctl=%s: another server is listening there", path);
    errno = EADDRINUSE;
    return -1;
  }
  return unlink (path);
}

/* A new socket listening at path, or -1 with *step naming what failed.
 * chmod between bind and listen: until listen nobody can connect, so
 * the socket is never reachable with looser permissions.
 */
static int
listen_at (const char *path, const char **step)
{
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int err;

  *step = "socket";
  if (fd == -1)
    return -1;
  *step = "bind";
  if (bind_path (fd, path) == 0) {
    *step = "chmod";
    if (chmod (path, 0600) == 0) {
      *step = "listen";
      if (listen (fd, CTL_MAX_CLIENTS) == 0)
        return fd;
    }
  }
  err = errno;
  if (strcmp (*step, "bind") != 0)
    unlink (path);
  close (fd);
  errno = err;
  return -1;
}

static int
open_socket (struct ctl_server *s)
{
  const char *step;
  int fd = listen_at (s->path, &step);

  if (fd == -1 && errno == EADDRINUSE && strcmp (step, "bind") == 0 &&
      remove_stale (s->path) == 0)
    fd = listen_at (s->path, &step);
  if (fd == -1) {
    if (errno != EADDRINUSE && errno != EEXIST)
      dc_error ("ctl=%s: cannot create the control socket: %s: %m", s->path,
                step);
    return -1;
  }
  s->listen_fd = fd;
  return 0;
}

/* nbdkit -u/-g changes user after get_ready, where the socket was made:
 * root's 0600 socket would shut out the server's own user, whom the
 * peer check admits.  Make it again as that user beside the old one and
 * rename it over, so the path is never missing.  If that user cannot
 * write there, the old socket stays and only root can use it.
 */
static void
remake_as_server_user (struct ctl_server *s)
{
  char tmp[sizeof s->path];
  const char *step = "path";
  struct stat st;
  int fd, err;

  if (stat (s->path, &st) == -1 || st.st_uid == geteuid ())
    return;
  if (snprintf (tmp, sizeof tmp, "%s.%ld", s->path, (long) getpid ()) >=
      (int) sizeof tmp)
    errno = ENAMETOOLONG;
  else if ((fd = listen_at (tmp, &step)) != -1) {
    step = "rename";
    if (rename (tmp, s->path) == 0) {
      close (s->listen_fd);
      s->listen_fd = fd;
      dc_debug ("ctl: control socket %s made again as uid %u", s->path,
                (unsigned) geteuid ());
      return;
    }
    err = errno;
    unlink (tmp);
    close (fd);
    errno = err;
  }
  dc_error ("ctl: %s belongs to uid %u, but the server now runs as uid %u "
            "and cannot make it again (%s: %m): only root can use it; give "
            "uid %u a directory it may write to", s->path,
            (unsigned) st.st_uid, (unsigned) geteuid (), step,
            (unsigned) geteuid ());
}

static void
free_server (struct ctl_server *s)
{
  if (s->listen_fd >= 0) {
    unlink (s->path);
    close (s->listen_fd);
  }
  for (int i = 0; i < 2; i++)
    if (s->stop_pipe[i] >= 0)
      close (s->stop_pipe[i]);
  free (s);
}

struct ctl_server *
ctl_open (const char *path)
{
  struct ctl_server *s = calloc (1, sizeof *s);
  int err;

  if (s == NULL) {
    dc_error ("ctl: out of memory");
    return NULL;
  }
  s->pid = getpid ();
  s->listen_fd = s->stop_pipe[0] = s->stop_pipe[1] = -1;
  if (path)
    snprintf (s->path, sizeof s->path, "%s", path);
  if ((path == NULL && default_path (s) == -1) || open_socket (s) == -1)
    goto err;
  if (pipe2 (s->stop_pipe, O_CLOEXEC | O_NONBLOCK) == -1) {
    dc_error ("ctl: pipe2: %m");
    goto err;
  }
  dc_debug ("ctl: control socket %s (discardctl -s %s)", s->path, s->path);
  return s;

 err:
  err = errno;
  free_server (s);
  errno = err;
  return NULL;
}

int
ctl_start (struct ctl_server *s, struct engine *e, struct volume *v)
{
  int err;

  s->e = e;
  s->v = v;
  if (s->default_path && s->pid != getpid ()) {
    rename_to_pid (s);
    dc_debug ("ctl: control socket %s (discardctl -s %s)", s->path, s->path);
  }
  remake_as_server_user (s);
  err = pthread_create (&s->thread, NULL, listener_thread, s);
  if (err) {
    errno = err;
    dc_error ("ctl: cannot start the listener thread: %m");
    return -1;
  }
  s->started = true;
  return 0;
}

void
ctl_stop (struct ctl_server *s)
{
  if (s == NULL)
    return;
  atomic_store (&s->stopping, true);
  if (s->started) {
    if (write (s->stop_pipe[1], "x", 1) == -1)
      dc_error ("ctl: cannot wake the control threads: %m");
    pthread_join (s->thread, NULL);
    for (int i = 0; i < CTL_MAX_CLIENTS; i++)
      if (s->clients[i].used)
        pthread_join (s->clients[i].thread, NULL);
  }
  free_server (s);
}

const char *
ctl_path (const struct ctl_server *s)
{
  return s->path;
}
