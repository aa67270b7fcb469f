/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the control socket server, started and stopped by the
 * service (created in service_open, before any fork; served from
 * service_start; removed in service_stop), so every front-end serves it.  A
 * listener thread accepts; each client gets a thread of its own (at most
 * CTL_MAX_CLIENTS), speaking the protocol of ctl-proto.h.  No thread
 * holds the engine's lock while it writes to a socket, and writes to a
 * client that does not read time out, so a stuck client never blocks
 * the data path.
 */
#ifndef DISCARDCACHE_CTL_H
#define DISCARDCACHE_CTL_H

struct engine;
struct volume;
struct ctl_server;

#define CTL_MAX_CLIENTS 16

/* Create the control socket at path, or, with path NULL, at the default path (ctl-proto.h's directory, created
 * 0700, then PID.sock): bound and listening, so that a path where it
 * cannot be made fails the start, but served by no thread yet.  Call it
 * before the front-end forks or daemonises (the socket goes with it to
 * the child) and ctl_start after.  Replaces a stale socket, never a live
 * one or another kind of file.  Returns NULL with errno set on failure
 * (reported).
 */
extern struct ctl_server *ctl_open (const char *path);

/* Serve volume v over engine e: start the listener thread.  At the
 * default path, a socket named after another pid (the process has forked
 * since ctl_open) is renamed to this process's PID.sock first.  0, or -1
 * (reported).
 */
extern int ctl_start (struct ctl_server *s, struct engine *e,
                      struct volume *v);

/* Stop serving: wake and join every thread (if started), close every
 * descriptor and remove the socket.  NULL is allowed.
 */
extern void ctl_stop (struct ctl_server *s);

/* The socket's path. */
extern const char *ctl_path (const struct ctl_server *s);

#endif /* DISCARDCACHE_CTL_H */
