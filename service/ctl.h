/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the control socket server, started and stopped by the
 * service (service_start, service_stop), so every front-end serves it.  A
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

/* Serve the control socket for volume v over engine e at path, or, with
 * path NULL, at the
 * default path (ctl-proto.h's directory, created 0700, then PID.sock).
 * Replaces a stale socket, never a live one or another kind of file.
 * Returns NULL with errno set on failure (reported).
 */
extern struct ctl_server *ctl_start (struct engine *e, struct volume *v,
                                     const char *path);

/* Stop serving: wake and join every thread, close every descriptor and
 * remove the socket.  NULL is allowed.
 */
extern void ctl_stop (struct ctl_server *s);

/* The socket's path. */
extern const char *ctl_path (const struct ctl_server *s);

#endif /* DISCARDCACHE_CTL_H */
