/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what the engine's unit tests (test-engine.c,
 * test-clean.c, test-small.c, test-protect.c, ...) share: an engine
 * opened on an in-memory backend with a file's settings and a test's,
 * its statistics, the discards the backend saw, and a virtual clock
 * (engine-util.c).
 */
#ifndef DISCARDCACHE_ENGINE_UTIL_H
#define DISCARDCACHE_ENGINE_UTIL_H

#include <stdint.h>

#include "engine.h"
#include "mem-backend.h"

#define KiB 1024
#define MiB (1024 * 1024)
#define MS(ms) ((uint64_t) (ms) * 1000000)  /* milliseconds in ns */

/* An engine on backend m: the default settings, then each key and
 * value of defaults (the file's own), then of keys (the test's): pairs,
 * NULL-ended, either list NULL for none.  NULL if it does not open,
 * with errno as engine_open left it.
 */
extern struct engine *try_open_engine_on (struct mem_backend *m,
                                          const char *const *defaults,
                                          const char *const *keys);

/* As try_open_engine_on, failing the test if it does not open. */
extern struct engine *open_engine_on (struct mem_backend *m,
                                      const char *const *defaults,
                                      const char *const *keys);

/* The engine's statistics now. */
extern struct engine_stats stats (struct engine *);

/* The discards backend m received, copied into out (MEM_MAX_CALLS). */
extern unsigned calls (struct mem_backend *m, struct mem_discard *out);

/* A clock that moves only when a test moves clock_ns. */
extern uint64_t clock_ns;
extern uint64_t virtual_clock (void *opaque);

/* Put the engine on the virtual clock, at 1 s. */
extern void use_virtual_clock (struct engine *);

#endif /* DISCARDCACHE_ENGINE_UTIL_H */
