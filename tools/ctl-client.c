/* discardcache: discardctl's connection to the control socket (see
 * ctl-client.h).
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "ctl-client.h"
#include "ctl-proto.h"
#include "log.h"

/* The greeting comes at once from a live server. */
#define HELLO_TIMEOUT_MS 10000
/* Sockets listed when several servers run. */
#define MAX_CANDIDATES 16

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

/* A default socket is named after its server's pid; one whose server
 * is gone (killed, so it could not remove it) is not a candidate.
 */
static bool
live_socket_name (const char *name)
{
  char *end;
  long pid = strtol (name, &end, 10);

  if (end == name || strcmp (end, ".sock") != 0 || pid <= 0 || name[0] == '0')
    return false;
  return kill ((pid_t) pid, 0) == 0 || errno == EPERM;
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
    if (live_socket_name (ent->d_name) && strlen (ent->d_name) < 64) {
      if (n < max)
        strcpy (names[n], ent->d_name);
      n++;
    }
  closedir (d);
  return n;
}

static int
too_many (const char *dir, char names[][64], int n)
{
  char list[MAX_CANDIDATES * 80] = "";
  size_t len = 0;

  for (int i = 0; i < n && i < MAX_CANDIDATES; i++)
    len += snprintf (list + len, sizeof list - len, "\n  %s/%s", dir, names[i]);
  dc_error ("%d discardcache servers are running; choose one with -s SOCKET "
            "or DISCARDCACHE_CTL:%s", n, list);
  return EXIT_USAGE;
}

int
ctl_conn_resolve (struct ctl_conn *conn, const char *opt)
{
  const char *env = getenv ("DISCARDCACHE_CTL");
  char dir[sizeof conn->path], path[sizeof conn->path + 64];
  char names[MAX_CANDIDATES][64];
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
    dc_error ("no control socket found in %s%s%s (is a discardcache server "
              "running? name its socket with -s SOCKET or DISCARDCACHE_CTL)",
              dir, n == -1 ? ": " : "", n == -1 ? strerror (errno) : "");
    return EXIT_CONNECT;
  }
  snprintf (path, sizeof path, "%s/%s", dir, names[0]);
  return set_path (conn, path);
}

static int
connect_failed (const struct ctl_conn *conn)
{
  const char *why = errno == ENOENT ? "no such socket (is the server running, "
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
  struct sockaddr_un sun = { .sun_family = AF_UNIX };

  conn->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (conn->fd == -1) {
    dc_error ("socket: %m");
    return EXIT_CONNECT;
  }
  snprintf (sun.sun_path, sizeof sun.sun_path, "%s", conn->path);
  if (connect (conn->fd, (struct sockaddr *) &sun, sizeof sun) == -1)
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
