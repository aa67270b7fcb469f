/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: a stop that ends with clients attached.  nbdkit 1.32,
 * on SIGTERM, answers every later request with ESHUTDOWN and exits only
 * when the clients go; the kernel client never goes.  Here the plugin
 * takes SIGTERM (and nbdkit's other quit signals) itself: it ends the
 * connections' reads, lets nbdkit answer what was already read, waits
 * for the connections to close, and only then asks nbdkit to quit.
 */
#ifndef DISCARDCACHE_STOP_H
#define DISCARDCACHE_STOP_H

#include <stdbool.h>
#include <stdint.h>

struct plugin_stop;

/* Take the quit signals over from nbdkit (call after nbdkit installed
 * its handlers: in after_fork) and start the watching thread.  A stop
 * waits TIMEOUT_MS at most for the connections; CTL is the control
 * socket's path (its clients are not nbdkit's), or NULL.  NULL on
 * error, reported: nbdkit's own handling stays.
 */
extern struct plugin_stop *plugin_stop_start (uint64_t timeout_ms,
                                              const char *ctl);

/* A connection opened (.open) or closed (.close). */
extern void plugin_stop_opened (struct plugin_stop *ps);
extern void plugin_stop_closed (struct plugin_stop *ps);

/* A request reached the plugin (each data callback). */
extern void plugin_stop_request (struct plugin_stop *ps);

/* Whether a stop has begun: new connections are refused (.preconnect). */
extern bool plugin_stop_stopping (struct plugin_stop *ps);

/* What is left of TIMEOUT_MS since the stop began (all of it if none
 * did): the service's stop spends the rest.
 */
extern uint64_t plugin_stop_remaining_ms (struct plugin_stop *ps);

/* Stop the thread and give the signals back to nbdkit's handler. */
extern void plugin_stop_free (struct plugin_stop *ps);

#endif /* DISCARDCACHE_STOP_H */
