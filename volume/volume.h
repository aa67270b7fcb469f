/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the volume, the data path the front-ends call.  It sits
 * between the service (above) and the engine (below):
 *
 *   identity  passes every request through to the engine unchanged;
 *   thin      maps logical slots to physical ones (volume/thin/),
 *             driving the engine only through engine.h.
 *
 * Threads: the data path (pread, pwrite, zero, trim, flush, extents),
 * the statistics and the map dump may be called from several threads
 * at once; volume_open and volume_close by the owning thread alone,
 * close with no request in progress.  Locks go volume, then engine;
 * none is held on return, and the engine never calls up.  Functions
 * returning int return 0 or -1 with errno set, the error reported once
 * with dc_error.
 */
#ifndef DISCARDCACHE_VOLUME_H
#define DISCARDCACHE_VOLUME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "engine.h"
#include "thin-stats.h"

struct volume;

/* The volume's keys (thin=, slot=, size=, meta=). */
struct volume_config {
  bool thin;                   /* thin=on: map logical slots to physical */
  uint64_t slot;               /* thin slot size, a power of two; 0:
                                  auto (meta='s, else the discard
                                  granularity, at least 4 KiB) */
  uint64_t size;               /* thin exported size; 0: the backend's */
  char *meta;                  /* thin map and journal (owned) */
  uint64_t reserve;            /* thin reuse reserve: bytes, or with
                                  reserve_percent hundredths of a percent
                                  of the exported size; VOLUME_RESERVE_AUTO:
                                  the default */
  bool reserve_percent;
};

/* reserve= unset: the larger of 64 MiB and 1% of the exported size. */
#define VOLUME_RESERVE_AUTO UINT64_MAX

/* Thin mode's statistics (all 0 without thin=on). */
/* Thin mode's statistics, one member a field of thin-stats.h's table. */
struct thin_stats {
  THIN_STATS (STATS_MEMBER)
};

/* Everything statistics show: the engine's counters and the volume's. */
struct volume_stats {
  struct engine_stats engine;
  bool thin;
  struct thin_stats th;
};

/* Fill in the defaults documented in the man page. */
extern void volume_config_init (struct volume_config *cfg);
extern void volume_config_free (struct volume_config *cfg);

/* Apply one key=value.  Returns 0, -1 on a bad value (reported, errno
 * EINVAL, cfg unchanged), or 1 if key is not a volume key.
 */
extern int volume_config_set (struct volume_config *cfg, const char *key,
                              const char *value);

/* Check what single keys cannot (meta= with thin=on, thin keys without
 * it).  0, or -1 (reported).
 */
extern int volume_config_complete (const struct volume_config *cfg);

/* Open the volume the config asks for over engine e (not owned: close
 * the volume before the engine).  Thin mode loads or creates meta=.
 * NULL with errno set on failure (reported, naming the key).
 */
extern struct volume *volume_open (struct engine *e,
                                   const struct volume_config *cfg);

/* Make the volume's metadata durable (thin: commit the journal and
 * write a checkpoint), then free it.  NULL allowed.
 */
extern void volume_close (struct volume *v);

/* The exported disk. */
extern uint64_t volume_size (const struct volume *v);
extern const struct backend_limits *volume_limits (const struct volume *v);
/* The discard granularity in force (for statfs and block sizes). */
extern uint64_t volume_granularity (const struct volume *v);

/* The data path, NBD semantics on the exported disk.  fast: fail with
 * EOPNOTSUPP at once rather than write zeros slowly.
 */
extern int volume_pread (struct volume *v, void *buf, uint32_t count,
                         uint64_t offset);
extern int volume_pwrite (struct volume *v, const void *buf, uint32_t count,
                          uint64_t offset, bool fua);
extern int volume_zero (struct volume *v, uint64_t offset, uint64_t length,
                        bool may_trim, bool fua, bool fast);
extern int volume_trim (struct volume *v, uint64_t offset, uint64_t length,
                        bool fua);
/* A client's FLUSH: acknowledged writes (and thin mode's map) durable. */
extern int volume_flush (struct volume *v);
extern int volume_extents (struct volume *v, uint64_t offset, uint64_t length,
                           backend_extent_fn fn, void *opaque);

/* Thin mode: hand the whole reuse reserve (reserve=) to the engine as
 * pending discards, for discardctl flush --reserve.  Identity: nothing
 * to do.  0, or -1 (reported).
 */
extern int volume_release_reserve (struct volume *v);

/* Work that needs no client input (invariant 8), called by the service
 * about every TICK interval while it serves: thin mode gives its reuse
 * reserve up while the engine reports space pressure (invariant 12), so
 * an idle client does not keep it while the store fills.  Identity:
 * nothing to do.  0, or -1 (reported).
 */
extern int volume_tick (struct volume *v);

/* The statistics: the engine's and the volume's own. */
extern void volume_get_stats (struct volume *v, struct volume_stats *st);

/* One run of thin mode's map: logical slots [logical, logical+length)
 * at physical slots [physical, physical+length).
 */
struct volume_map_run {
  uint64_t logical, physical, length;
};

/* Thin mode's map: copy up to max runs that hold logical slots from slot
 * `from' on, in order, into runs[] (slot numbers; the slot size is in
 * the statistics; a run holding `from' starts there).  Returns how many
 * (0: none left), or -1 with errno ENOTSUP on an identity volume.  The
 * volume's lock is held for one batch only.
 */
extern ssize_t volume_dump_map_batch (struct volume *v, uint64_t from,
                                      struct volume_map_run *runs, size_t max);

#endif /* DISCARDCACHE_VOLUME_H */
