/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the engine, the discard cache itself.  It owns the
 * backend, the extent map of pending discards, the in-flight list and
 * the flusher thread.  The volume layer above (identity or thin) drives
 * it through this header alone, at backend addresses; the engine knows
 * nothing of volumes, sockets or front-ends.
 *
 * Invariant 1: a write or zero removes the overlapping pending range
 * before it reaches the backend, and waits for any overlapping discard
 * already in flight; so no discard is sent over data written after that
 * discard was received.
 *
 * Invariant 9 (discard once): the engine remembers, in whole granules,
 * what the backend has discarded and nothing has written since (the
 * known-clean map, bounded by max-clean-extents); a TRIM over it is
 * acknowledged and counted, not sent again.  A write or zero takes its
 * granules out of that map in the same step as it cancels pending
 * discards.
 *
 * Threads: every function here may be called from several threads at
 * once (nbdkit's parallel model, FUSE's worker threads, the control
 * socket's thread), except engine_open, engine_start, engine_stop and
 * engine_close, which the thread that owns the engine calls alone,
 * with no request in progress at engine_stop and engine_close.  One
 * mutex inside guards the engine's state; it is never held across the
 * backend's I/O, and never on return.
 *
 * Functions returning int return 0 or -1 with errno set, the error
 * reported once with dc_error.
 */
#ifndef DISCARDCACHE_ENGINE_H
#define DISCARDCACHE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "engine-config.h"
#include "engine-stats.h"
#include "extmap.h"

struct engine;

/* The statistics, one member a field of engine-stats.h's table. */
struct engine_stats {
  ENGINE_STATS (STATS_MEMBER)
};

/* Build an engine around backend b (opened by the caller: the service,
 * or a test's in-memory one), loading state= if set.  The config is
 * copied.  The engine owns b from now on, even when this fails.
 * Returns NULL with errno set on failure (reported).
 */
extern struct engine *engine_open (const struct engine_config *cfg,
                                   struct backend *b);

/* Start the backend's threads and the flusher thread (nbdkit: in
 * after_fork, never before).
 */
extern int engine_start (struct engine *e);

/* Stop the flusher, then save what is pending to the state file
 * (state=FILE) or, without one or if saving fails, forward it, largest
 * first, for at most timeout_ms, leaving what small= holds; what is
 * left is counted as dropped (dropped_small_bytes, dropped_stop_bytes)
 * and logged.  Runs once: a second call does nothing.
 */
extern void engine_stop (struct engine *e, uint64_t timeout_ms);

/* Close the backend and free everything (NULL allowed).  Stops the
 * engine first if engine_stop has not run (with a state file, that
 * saves what is pending).
 */
extern void engine_close (struct engine *e);

/* The backend's size, limits and identity (its name as given, for
 * messages and listings), the identity what is saved for it is tied to
 * (backend_saved_identity: a stable name where the store has one), and
 * the discard granularity in force (the backend's, or a coarser
 * granularity=).
 */
extern uint64_t engine_size (const struct engine *e);
extern const struct backend_limits *engine_limits (const struct engine *e);
extern const struct backend_identity *engine_identity (const struct engine *e);
extern const struct backend_identity *
engine_saved_identity (const struct engine *e);
extern uint64_t engine_granularity (const struct engine *e);

/* Data path, at backend addresses.  Offsets and lengths must lie within
 * engine_size (else EINVAL, reported).
 */
extern int engine_pread (struct engine *e, void *buf, uint32_t count,
                         uint64_t offset);
extern int engine_pwrite (struct engine *e, const void *buf, uint32_t count,
                          uint64_t offset, bool fua);
/* fast: fail with EOPNOTSUPP at once rather than write zeros slowly. */
extern int engine_zero (struct engine *e, uint64_t offset, uint64_t length,
                        bool may_trim, bool fua, bool fast);
/* Record a trim; fua (or passthrough) forwards it before returning. */
extern int engine_trim (struct engine *e, uint64_t offset, uint64_t length,
                        bool fua);
/* A client's FLUSH: the backend's flush; with flush-discards=true,
 * pending discards go first.
 */
extern int engine_flush (struct engine *e);
/* The backend's flush alone, whatever flush-discards says (a volume's
 * own metadata commits make data durable, not discards).
 */
extern int engine_flush_data (struct engine *e);
extern int engine_extents (struct engine *e, uint64_t offset, uint64_t length,
                           backend_extent_fn fn, void *opaque);

/* Forward every pending discard now, ignoring delay, minlen, small,
 * idle and rate, joining extents across known-clean gaps where that
 * saves commands.  Afterwards only sub-granule fragments remain.  Stores the
 * number of commands and bytes forwarded (either may be NULL).
 */
extern int engine_drain (struct engine *e, uint64_t *commands,
                         uint64_t *bytes);

/* A flush asked for from the control socket: the flusher forwards every
 * forwardable pending discard, ignoring delay, minlen, small, idle,
 * rate and pause (joining as engine_drain does), and the asker follows
 * it without blocking anyone.
 */
struct engine_flush {
  uint64_t ticket;
  uint64_t start_ms;
  uint64_t forwarded;               /* the counters when it began */
  uint64_t forwarded_bytes;
  uint64_t total_bytes;             /* forwardable bytes when it began */
};

struct engine_flush_progress {
  uint64_t forwarded;               /* commands sent since it began */
  uint64_t forwarded_bytes;         /* (by anyone: FUA trims included) */
  uint64_t total_bytes;
  uint64_t elapsed_ms;
};

/* Ask the flusher to forward everything forwardable now. */
extern void engine_flush_begin (struct engine *e, struct engine_flush *f);

/* Wait at most timeout_ms for flush f, filling *p either way.  Returns
 * 1 when it is done (nothing forwardable was left), 0 on timeout, or -1
 * with errno when it stopped early: the backend's error (already
 * reported), EOPNOTSUPP when the backend cannot discard, ESHUTDOWN when
 * the engine is stopping.
 */
extern int engine_flush_wait (struct engine *e, const struct engine_flush *f,
                              uint64_t timeout_ms,
                              struct engine_flush_progress *p);

/* Copy up to max pending extents that end after from, in address order,
 * into out, and the engine's clock into *now_ticks (the age of x in ms
 * is *now_ticks - x.time).  Holds the lock for this batch only: call
 * again from the end of the last extent for the next one.  Returns how
 * many were copied (0: none left).  Not a snapshot: extents may change
 * between batches.
 */
extern size_t engine_dump_batch (struct engine *e, uint64_t from,
                                 struct extent *out, size_t max,
                                 uint32_t *now_ticks);

/* Whether a discard is pending or in flight over any part of
 * [offset, offset+length): the one question a volume asks of the cache
 * (does writing over this range cancel a discard).
 */
extern bool engine_discard_pending (struct engine *e, uint64_t offset,
                                    uint64_t length);

/* Whether every byte of [offset, offset+length) is known clean: the
 * backend discarded it and nothing has written it since (with the
 * backend's discard_zeroes, it reads as zeros).  False when the map is
 * off or has forgotten any of it.
 */
extern bool engine_known_clean (struct engine *e, uint64_t offset,
                                uint64_t length);

/* Forget the whole known-clean map, so that every later TRIM reaches
 * the backend again (discardctl forget-clean).  Stores what was
 * forgotten (either may be NULL).
 */
extern void engine_forget_clean (struct engine *e, uint64_t *extents,
                                 uint64_t *bytes);

/* Stop or restart the flusher's forwarding (drain still works).
 * Restarting also closes the circuit breaker (discardctl resume).
 */
extern void engine_pause (struct engine *e, bool paused);

/* Whether the backend's free space is below low-water= now (or pressure
 * was set by hand): thin mode then discards its reuse reserve.
 */
extern bool engine_under_pressure (struct engine *e);

/* Change a runtime-safe key (delay, minlen, idle, rate) while running. */
extern int engine_set (struct engine *e, const char *key, const char *value);

/* The statistics, one snapshot, in O(1): nothing walks the map. */
extern void engine_get_stats (struct engine *e, struct engine_stats *st);

#endif /* DISCARDCACHE_ENGINE_H */
