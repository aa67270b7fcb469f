/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the control server's state, shared by ctl.c (sockets
 * and threads) and ctl-commands.c (what each request does).
 */
#ifndef DISCARDCACHE_CTL_INTERNAL_H
#define DISCARDCACHE_CTL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/un.h>

#include "ctl-proto.h"
#include "ctl.h"

struct ctl_client {
  struct ctl_server *s;
  int fd;
  bool used;                   /* slot taken; the listener's alone */
  atomic_bool done;            /* the thread has finished: join it */
  pthread_t thread;
  FILE *out;                   /* the reply being built */
  char *out_buf;
  size_t out_len;
  struct ctl_linebuf lb;
};

struct ctl_server {
  struct engine *e;
  struct volume *v;
  char path[sizeof ((struct sockaddr_un *) 0)->sun_path];
  bool default_path;           /* PID.sock in the default directory */
  pid_t pid;                   /* the process that bound it */
  bool started;                /* the listener thread runs */
  int listen_fd;
  int stop_pipe[2];            /* readable once stopping: wakes every poll */
  atomic_bool stopping;
  pthread_t thread;            /* the listener */
  struct ctl_client clients[CTL_MAX_CLIENTS];
};

/* Whether ctl_stop has begun. */
extern bool ctl_stopping (const struct ctl_server *s);

/* Whether the client has closed its end (checked during long waits). */
extern bool ctl_client_gone (struct ctl_client *c);

/* Send all of buf, waiting (bounded) while the client is slow.  0, or -1
 * when the client is gone, stuck, or the server is stopping.
 */
extern int ctl_send (struct ctl_client *c, const char *buf, size_t len);

/* Build a reply in a memory stream (ctl_out_open), then send it and free
 * it (ctl_out_send, 0 or -1).  NULL from ctl_out_open: out of memory.
 */
extern FILE *ctl_out_open (struct ctl_client *c);
extern int ctl_out_send (struct ctl_client *c);

/* Send {"ok":false,"error":msg}.  0 or -1 as ctl_send. */
extern int ctl_send_error (struct ctl_client *c, const char *msg);

/* The greeting sent on connect.  0 or -1. */
extern int ctl_hello (struct ctl_client *c);

/* Answer one request line.  0 to read the next, -1 to disconnect. */
extern int ctl_handle_line (struct ctl_client *c, char *line, size_t len);

#endif /* DISCARDCACHE_CTL_INTERNAL_H */
