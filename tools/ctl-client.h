/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: discardctl's side of the control socket: finding the
 * socket, connecting, sending a request and reading the reply lines.
 * Failures are reported with dc_error and returned as discardctl's exit
 * codes.
 */
#ifndef DISCARDCACHE_CTL_CLIENT_H
#define DISCARDCACHE_CTL_CLIENT_H

#include <stdio.h>
#include <sys/un.h>

#include "json-flat.h"

/* discardctl's exit codes. */
enum {
  EXIT_OK = 0,
  EXIT_SERVER = 1,             /* the server answered with an error */
  EXIT_USAGE = 2,              /* bad command line (or which server?) */
  EXIT_CONNECT = 3,            /* cannot connect, refused, or lost */
};

struct ctl_conn {
  int fd;
  FILE *in;
  char *line;                  /* the last line read, parsed in place */
  size_t cap;
  char *raw;                   /* the same line as it came (for --json) */
  size_t raw_cap;
  char path[sizeof ((struct sockaddr_un *) 0)->sun_path];
};
#define CTL_CONN_INIT { .fd = -1 }

/* Pick the socket: opt (-s), else $DISCARDCACHE_CTL, else the one live
 * socket in the default directory.  EXIT_OK with conn->path set, or
 * EXIT_USAGE / EXIT_CONNECT (reported).
 */
extern int ctl_conn_resolve (struct ctl_conn *conn, const char *opt);

/* Connect to conn->path and check the greeting.  EXIT_OK or EXIT_CONNECT
 * (reported: missing, permission denied, nothing listening, refused).
 */
extern int ctl_conn_open (struct ctl_conn *conn);

/* Send one request line (no newline).  EXIT_OK or EXIT_CONNECT. */
extern int ctl_conn_send (struct ctl_conn *conn, const char *request);

/* Read the next reply line into *obj (which points into conn->line;
 * conn->raw keeps the text as it came).  Returns 1 for the final line
 * of a reply (it has "ok"), 0 for a line before it, or -1 when the
 * connection is lost or the line is not JSON (reported).
 */
extern int ctl_conn_read (struct ctl_conn *conn, struct jf_object *obj);

/* The final line's verdict: EXIT_OK for "ok":true, else EXIT_SERVER with
 * the server's error reported.
 */
extern int ctl_conn_verdict (const struct ctl_conn *conn,
                             const struct jf_object *obj);

/* Close the connection (safe on one never opened). */
extern void ctl_conn_close (struct ctl_conn *conn);

#endif /* DISCARDCACHE_CTL_CLIENT_H */
