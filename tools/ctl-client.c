/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: discardctl's connection to the control socket (see
 * ctl-client.h).
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "ctl-client.h"
#include "ctl-proto.h"
#include "log.h"

/* The greeting comes at once from a live server. */
#define HELLO_TIMEOUT_MS 10000
/* Sockets listed when several servers run. */
#define MAX_CANDIDATES 16
/* The default directory without XDG_RUNTIME_DIR (ctl_default_dir), where
 * the systemd units put their sockets.
 */
#define CTL_SYSTEM_DIR "/run/discardcache"
/* Each listed server's greeting, waited for at most this long. */
#define DESCRIBE_TIMEOUT_MS 1000

static int
set_path (struct ctl_conn *conn, const char *path)
{
  if (snprintf (conn->path, sizeof conn->path, "%s", path)
      >= (int) sizeof conn->path) {
    dc_error ("%s: too long for a Unix socket path (at most %zu bytes)",
              path, sizeof conn->path - 1);
    return EXIT_USAGE;
  }
  return EXIT_OK;
}

/* Connect to path and return the descriptor, or -1 with errno set. */
static int
connect_unix (const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int saved;

  if (fd == -1)
    return -1;
  snprintf (sun.sun_path, sizeof sun.sun_path, "%s", path);
  if (connect (fd, (struct sockaddr *) &sun, sizeof sun) == -1) {
    saved = errno;
    close (fd);
    errno = saved;
    return -1;
  }
  return fd;
}

/* Whether dir/name is a live server's socket.  A default socket is named
 * after its server's pid: one whose server is gone (killed, so it could
 * not remove it) is not a candidate.  Any other NAME.sock (a stable ctl=
 * path, as the systemd units give) is live when it accepts a connection.
 */
static bool
live_socket (const char *dir, const char *name)
{
  char path[sizeof ((struct sockaddr_un *) 0)->sun_path];
  size_t len = strlen (name);
  struct stat st;
  char *end;
  long pid = strtol (name, &end, 10);
  int fd;

  if (len <= 5 || strcmp (name + len - 5, ".sock") != 0)
    return false;
  if (end != name && strcmp (end, ".sock") == 0 && name[0] != '0')
    return pid > 0 && (kill ((pid_t) pid, 0) == 0 || errno == EPERM);
  if (snprintf (path, sizeof path, "%s/%s", dir, name) >= (int) sizeof path ||
      stat (path, &st) == -1 || !S_ISSOCK (st.st_mode) ||
      (fd = connect_unix (path)) == -1)
    return false;
  close (fd);
  return true;
}

static int
list_candidates (const char *dir, char names[][64], int max)
{
  DIR *d = opendir (dir);
  struct dirent *ent;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((ent = readdir (d)) != NULL)
    if (strlen (ent->d_name) < 64 && live_socket (dir, ent->d_name)) {
      if (n < max)
        strcpy (names[n], ent->d_name);
      n++;
    }
  closedir (d);
  return n;
}

/* "backend=/srv/disk.img, pid 123" from the server's greeting, so that a
 * list of servers says which is which; quietly less from a server that
 * does not answer or does not say (an older one).
 */
static void
describe_server (const char *path, char *buf, size_t n)
{
  char line[CTL_MAX_LINE + 1];
  struct pollfd p = { .events = POLLIN };
  struct jf_object obj;
  const char *backend;
  uint64_t pid = 0;
  ssize_t got = 0, r;

  snprintf (buf, n, "(no answer)");
  if ((p.fd = connect_unix (path)) == -1)
    return;
  while ((size_t) got < sizeof line - 1 && memchr (line, '\n', got) == NULL &&
         poll (&p, 1, DESCRIBE_TIMEOUT_MS) == 1 &&
         (r = read (p.fd, line + got, sizeof line - 1 - got)) > 0)
    got += r;
  close (p.fd);
  line[got] = '\0';
  if (memchr (line, '\n', got) == NULL || jf_parse (line, &obj) == -1)
    return;
  backend = jf_str (&obj, "backend");
  jf_u64 (&obj, "pid", &pid);
  snprintf (buf, n, "backend=%s, pid %" PRIu64, backend ? backend : "?", pid);
}

static int
too_many (const char *dir, char names[][64], int n)
{
  char list[MAX_CANDIDATES * 400] = "", path[PATH_MAX], what[300];
  size_t len = 0;

  for (int i = 0; i < n && i < MAX_CANDIDATES && len < sizeof list; i++) {
    snprintf (path, sizeof path, "%s/%s", dir, names[i]);
    describe_server (path, what, sizeof what);
    len += snprintf (list + len, sizeof list - len, "\n  %s  (%s)", path, what);
  }
  dc_error ("%d discardcache servers are running; choose one with -s SOCKET "
            "or DISCARDCACHE_CTL:%s", n, list);
  return EXIT_USAGE;
}

/* When the default directory holds no socket: the system's directory
 * may (a root login has XDG_RUNTIME_DIR=/run/user/0, while the systemd
 * units' sockets are in /run/discardcache).  " (/run/discardcache holds
 * N: ...)" or "".
 */
static void
hint_system_dir (const char *dir, char *buf, size_t n)
{
  char names[MAX_CANDIDATES][64];
  int found;

  buf[0] = '\0';
  if (strcmp (dir, CTL_SYSTEM_DIR) == 0)
    return;
  found = list_candidates (CTL_SYSTEM_DIR, names, MAX_CANDIDATES);
  if (found > 0)
    snprintf (buf, n, "; %s holds %d, e.g. -s %s/%s", CTL_SYSTEM_DIR, found,
              CTL_SYSTEM_DIR, names[0]);
}

int
ctl_conn_resolve (struct ctl_conn *conn, const char *opt)
{
  const char *env = getenv ("DISCARDCACHE_CTL");
  char dir[sizeof conn->path], path[sizeof conn->path + 64];
  char names[MAX_CANDIDATES][64], hint[200];
  int n;

  if (opt)
    return set_path (conn, opt);
  if (env && *env)
    return set_path (conn, env);
  if (ctl_default_dir (dir, sizeof dir) == -1) {
    dc_error ("the default socket directory is too long a path: use -s SOCKET");
    return EXIT_USAGE;
  }
  n = list_candidates (dir, names, MAX_CANDIDATES);
  if (n > 1)
    return too_many (dir, names, n);
  if (n <= 0) {
    const char *why = n == -1 ? strerror (errno) : NULL;

    hint_system_dir (dir, hint, sizeof hint);
    dc_error ("no control socket found in %s%s%s (is a discardcache server "
              "running? name its socket with -s SOCKET or DISCARDCACHE_CTL%s)",
              dir, why ? ": " : "", why ? why : "", hint);
    return EXIT_CONNECT;
  }
  snprintf (path, sizeof path, "%s/%s", dir, names[0]);
  return set_path (conn, path);
}

/* -s naming something that is not a socket: say what it is, rather than
 * suggest a killed server.  Returns false for a socket (or nothing).
 */
static bool
not_a_socket (const char *path)
{
  struct stat st;

  if (stat (path, &st) == -1 || S_ISSOCK (st.st_mode))
    return false;
  if (S_ISDIR (st.st_mode))
    dc_error ("%s: cannot connect: a directory, not a socket (name the "
              "socket in it, e.g. %s/NAME.sock)", path, path);
  else if (S_ISREG (st.st_mode))
    dc_error ("%s: cannot connect: a regular file, not a socket (for the "
              "statistics a server left in statsfile=, use stats --file=%s)",
              path, path);
  else
    dc_error ("%s: cannot connect: not a socket", path);
  return true;
}

static int
connect_failed (const struct ctl_conn *conn)
{
  const char *why;

  if (errno != ENOENT && not_a_socket (conn->path))
    return EXIT_CONNECT;
  why = errno == ENOENT ? "no such socket (is the server running, "
                                      "and is this its ctl= path?)"
                  : errno == EACCES || errno == EPERM
                    ? "permission denied (the socket is 0600: run as root or "
                      "as the user running the server)"
                  : errno == ECONNREFUSED
                    ? "connection refused: nothing is listening (a socket "
                      "left by a server that was killed?)"
                  : strerror (errno);

  dc_error ("%s: cannot connect: %s", conn->path, why);
  return EXIT_CONNECT;
}

/* The greeting: {"ok":true,"hello":"discardcache","protocol":1,...}, or
 * the refusal ({"ok":false,"error":...}) of a server that does not
 * accept us.
 */
static int
read_hello (struct ctl_conn *conn)
{
  struct pollfd p = { .fd = conn->fd, .events = POLLIN };
  struct jf_object obj;
  uint64_t protocol;
  const char *err;

  if (poll (&p, 1, HELLO_TIMEOUT_MS) != 1) {
    dc_error ("%s: no greeting from the server within %d s", conn->path,
              HELLO_TIMEOUT_MS / 1000);
    return EXIT_CONNECT;
  }
  if (ctl_conn_read (conn, &obj) != 1)
    return EXIT_CONNECT;
  if ((err = jf_str (&obj, "error")) != NULL) {
    dc_error ("%s: refused by the server: %s", conn->path, err);
    return EXIT_CONNECT;
  }
  if (!jf_u64 (&obj, "protocol", &protocol) || protocol != CTL_PROTOCOL_VERSION) {
    dc_error ("%s: the server speaks control protocol %s, this discardctl "
              "speaks %d", conn->path,
              jf_find (&obj, "protocol") ? jf_find (&obj, "protocol")->value
                                         : "(none)", CTL_PROTOCOL_VERSION);
    return EXIT_CONNECT;
  }
  return EXIT_OK;
}

int
ctl_conn_open (struct ctl_conn *conn)
{
  conn->fd = connect_unix (conn->path);
  if (conn->fd == -1)
    return connect_failed (conn);
  conn->in = fdopen (conn->fd, "r");
  if (conn->in == NULL) {
    dc_error ("fdopen: %m");
    return EXIT_CONNECT;
  }
  return read_hello (conn);
}

int
ctl_conn_send (struct ctl_conn *conn, const char *request)
{
  size_t len = strlen (request);
  char *line = malloc (len + 1);
  size_t done = 0;

  if (line == NULL) {
    dc_error ("out of memory");
    return EXIT_CONNECT;
  }
  memcpy (line, request, len);
  line[len++] = '\n';
  while (done < len) {
    ssize_t n = send (conn->fd, line + done, len - done, MSG_NOSIGNAL);

    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1) {
      dc_error ("%s: lost the connection: %m", conn->path);
      free (line);
      return EXIT_CONNECT;
    }
    done += n;
  }
  free (line);
  return EXIT_OK;
}

int
ctl_conn_read (struct ctl_conn *conn, struct jf_object *obj)
{
  ssize_t n = getline (&conn->line, &conn->cap, conn->in);

  if (n <= 0) {
    if (ferror (conn->in))
      dc_error ("%s: lost the connection: %m", conn->path);
    else
      dc_error ("%s: the server closed the connection", conn->path);
    return -1;
  }
  if (conn->raw_cap < (size_t) n + 1) {
    free (conn->raw);
    conn->raw_cap = n + 1;
    if ((conn->raw = malloc (conn->raw_cap)) == NULL) {
      conn->raw_cap = 0;
      dc_error ("out of memory");
      return -1;
    }
  }
  memcpy (conn->raw, conn->line, n + 1);
  if (jf_parse (conn->line, obj) == -1) {
    dc_error ("%s: not a JSON object from the server: %.200s", conn->path,
              conn->raw);
    return -1;
  }
  return jf_find (obj, "ok") != NULL;
}

int
ctl_conn_verdict (const struct ctl_conn *conn, const struct jf_object *obj)
{
  bool ok = false;
  const char *err = jf_str (obj, "error");

  if (jf_bool (obj, "ok", &ok) && ok)
    return EXIT_OK;
  dc_error ("%s", err ? err : "the server answered with an error");
  return EXIT_SERVER;
}

void
ctl_conn_close (struct ctl_conn *conn)
{
  if (conn->in)
    fclose (conn->in);
  else if (conn->fd >= 0)
    close (conn->fd);
  free (conn->line);
  free (conn->raw);
  conn->in = NULL;
  conn->fd = -1;
  conn->line = conn->raw = NULL;
  conn->cap = conn->raw_cap = 0;
}
