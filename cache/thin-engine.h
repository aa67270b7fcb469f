/* discardcache: thin mode inside the engine (thin.c; the map and the
 * meta file are in thin.h).  The engine_* data-path functions dispatch
 * here when thin=on; each has engine.h's semantics on the exported
 * (logical) disk.
 */
#ifndef DISCARDCACHE_THIN_ENGINE_H
#define DISCARDCACHE_THIN_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "engine.h"

struct thin;

/* Check slot=, size= and meta= against the backend, then load the map
 * from meta= (checkpoint and journal; a torn tail is cut off) or create
 * it.  Sets e->thin.  0, or -1 with errno, the error reported naming
 * the key.
 */
extern int thin_open (struct engine *e);

/* Commit the journal and write a checkpoint (unless read-only), then
 * free everything.  Does nothing without thin mode.
 */
extern void thin_close (struct engine *e);

extern uint64_t thin_size (const struct thin *t);
/* The backend's limits, with extents always available (holes are the
 * unmapped slots).
 */
extern const struct backend_limits *thin_limits (const struct thin *t);

extern int thin_pread (struct thin *t, void *buf, uint32_t count,
                       uint64_t offset);
extern int thin_pwrite (struct thin *t, const void *buf, uint32_t count,
                        uint64_t offset, bool fua);
extern int thin_zero (struct thin *t, uint64_t offset, uint64_t length,
                      bool may_trim, bool fua, bool fast);
extern int thin_trim (struct thin *t, uint64_t offset, uint64_t length,
                      bool fua);
/* Backend flush, then the journal made durable. */
extern int thin_flush (struct thin *t);
extern int thin_extents (struct thin *t, uint64_t offset, uint64_t length,
                         backend_extent_fn fn, void *opaque);

/* Fill the thin_* fields of st. */
extern void thin_get_stats (struct thin *t, struct engine_stats *st);

/* Copy up to max mappings of logical slots from `from' on into
 * logical[] and physical[] (slot numbers).  Returns how many (0: none
 * left).  The lock is held for this batch only.
 */
extern size_t thin_dump_batch (struct thin *t, uint64_t from,
                               uint64_t *logical, uint32_t *physical,
                               size_t max);

/* Checkpoint when the journal passes bytes (tests make it small). */
extern void thin_set_journal_limit (struct thin *t, uint64_t bytes);

#endif /* DISCARDCACHE_THIN_ENGINE_H */
