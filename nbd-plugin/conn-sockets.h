/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: nbdkit's client connections, found among the process's
 * descriptors, so that a stop can end their reads (nbdkit 1.32 gives a
 * plugin no handle on them).
 */
#ifndef DISCARDCACHE_CONN_SOCKETS_H
#define DISCARDCACHE_CONN_SOCKETS_H

#include <stdbool.h>

/* At most MAX sockets accepted on one of this process's listening
 * sockets, except EXCLUDE's (a Unix path, the control socket; NULL:
 * none), into FDS.  Returns how many, -1 if the descriptors cannot be
 * listed (reported).
 */
extern int conn_sockets_find (const char *exclude, int *fds, int max);

/* Bytes the clients sent that nobody has read yet (SIOCINQ), summed. */
extern int conn_sockets_queued (const int *fds, int n);

/* shutdown(SHUT_RD) each: see conn-sockets.c for what that does. */
extern void conn_sockets_shut_reads (const int *fds, int n);

/* Remove the path of each of this process's listening Unix sockets
 * (absolute paths only), except EXCLUDE's: see conn-sockets.c for why.
 * Returns how many were removed.
 */
extern int conn_sockets_unlink_listeners (const char *exclude);

/* Whether a connection waits to be accepted on one of this process's
 * listening sockets, except EXCLUDE's.
 */
extern bool conn_sockets_pending (const char *exclude);

#endif /* DISCARDCACHE_CONN_SOCKETS_H */
