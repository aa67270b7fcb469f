/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: nbdkit's client connections, found among the process's
 * descriptors, so that a stop can end their reads (nbdkit 1.32 gives a
 * plugin no handle on them).
 */
#ifndef DISCARDCACHE_CONN_SOCKETS_H
#define DISCARDCACHE_CONN_SOCKETS_H

/* shutdown(SHUT_RD) every socket accepted on one of this process's
 * listening sockets, except EXCLUDE's (a Unix path, the control
 * socket; NULL: none).  Returns how many, -1 if the descriptors cannot
 * be listed (reported).
 */
extern int conn_sockets_shut_reads (const char *exclude);

#endif /* DISCARDCACHE_CONN_SOCKETS_H */
