/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the service's timer: a thread that calls volume_tick
 * every TICK_MS while the server serves, so that the work a volume does
 * without client input (thin mode's reserve under space pressure) is
 * never left waiting for a request that may not come (invariant 8).
 */
#ifndef DISCARDCACHE_TICK_H
#define DISCARDCACHE_TICK_H

#include "volume.h"

/* How often: a quarter of the bound the reserve's release promises
 * (a second), as often as the engine reads the backend's free space.
 */
#define TICK_MS 250

struct service_tick;

/* Start ticking v.  NULL (reported, errno set) if the thread cannot be
 * started.
 */
extern struct service_tick *tick_start (struct volume *v);

/* Stop the thread and wait for it; NULL is nothing to do. */
extern void tick_stop (struct service_tick *t);

#endif /* DISCARDCACHE_TICK_H */
