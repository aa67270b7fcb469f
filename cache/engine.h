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
#include "extmap.h"

struct engine;

struct engine_stats {
  uint64_t trims;                   /* trims received */
  uint64_t trim_bytes;
  uint64_t cancelled_by_writes;     /* pending bytes removed by writes */
  uint64_t cancelled_by_zeroes;     /* pending bytes removed by zeroes */
  uint64_t merges;                  /* inserts that joined existing extents */
  uint64_t forwarded;               /* discard commands sent to the backend */
  uint64_t forwarded_bytes;
  uint64_t dropped;                 /* pending extents given up, by reason: */
  uint64_t dropped_bytes;
  uint64_t dropped_full_bytes;      /*   on-full=drop at max-extents */
  uint64_t dropped_unsupported_bytes; /* the backend cannot discard */
  uint64_t dropped_fragment_bytes;  /*   sub-granule pieces at the bound */
  uint64_t dropped_nomem_bytes;     /*   cancelled whole when a split had no memory */
  uint64_t dropped_error_bytes;     /*   failed to forward at the bound */
  uint64_t pending_extents;
  uint64_t pending_bytes;
  uint64_t subgranule_bytes;        /* pending extents holding no whole granule */
  uint64_t inflight;                /* discards being sent now */
  uint64_t inflight_bytes;
  uint64_t write_waits;             /* writes that waited for a discard in flight */
  uint64_t forward_errors;          /* discards that failed and stay pending */
  uint64_t state_loaded_extents;    /* taken from state= at this start */
  uint64_t state_loaded_bytes;
  /* The known-clean map (invariant 9, max-clean-extents=). */
  uint64_t already_clean_bytes;     /* trimmed bytes known clean: not sent again */
  uint64_t clean_extents;           /* ranges known clean now */
  uint64_t clean_bytes;
  uint64_t clean_memory_bytes;      /* held by the known-clean map */
  uint64_t clean_forgotten_bytes;   /* clean bytes forgotten at the bound */
  uint64_t max_clean_extents;       /* 0: off */
  uint64_t state_loaded_clean_extents; /* taken from state= at this start */
  uint64_t state_loaded_clean_bytes;
  int last_error;                   /* errno of the last failed discard, 0 if none */
  bool discard_supported;           /* false once the backend said EOPNOTSUPP */
  bool paused;
  uint64_t granularity;
  uint64_t max_discard;
  uint64_t max_extents;
  uint64_t memory_bytes;            /* held by the extent map */
  uint64_t backend_allocated_bytes; /* space the store holds (backend_allocated),
                                       0 when it cannot tell */
  /* Measured cost of forwarding, and the pacing (budget=). */
  uint64_t discard_p50_us_64k;      /* discard latency by size class: */
  uint64_t discard_p99_us_64k;      /*   up to 64 KiB, */
  uint64_t discard_p50_us_1m;       /*   up to 1 MiB, */
  uint64_t discard_p99_us_1m;
  uint64_t discard_p50_us_16m;      /*   up to 16 MiB, */
  uint64_t discard_p99_us_16m;
  uint64_t discard_p50_us_large;    /*   larger */
  uint64_t discard_p99_us_large;
  uint64_t client_p99_us;           /* last 2 s, no discard in flight */
  uint64_t client_p99_discard_us;   /* last 2 s, beside a discard */
  uint64_t client_p99_all_us;       /* last 2 s, all */
  uint64_t client_requests_discard; /* last 2 s: requests beside a discard, */
  uint64_t client_requests;         /*   of all requests */
  uint64_t model_a_us;              /* fitted cost per command */
  uint64_t model_b_us_per_gib;      /* fitted cost per byte, per GiB */
  uint64_t stall_us;                /* client p99 beside - without a discard */
  uint64_t budget_us;               /* 0: no budget, no pacing */
  uint64_t pace_bytes_per_s;        /* forwarded in the last second */
  uint64_t pace_commands_per_s;
  uint64_t pace_max_len;            /* the flusher's current batch size */
  uint64_t pace_gap_us;             /* ... and spacing */
  uint64_t pace_rare_share_ppm;     /* RARE: share of requests beside a discard */
  uint64_t budget_overruns;         /* 1 s windows whose p99 beat the budget */
  uint64_t drain_eta_ms;            /* pending bytes at the current pace */
  uint64_t forced_by_memory;        /* discards sent past the budget, near max-extents */
  const char *pace_mode;            /* off, probe, fits, rare, idle, memory */
};

/* Build an engine around backend b (opened by the caller: the service,
 * or a test's in-memory one), loading state= if set.  The config is
 * copied.  The engine owns b from now on, even when this fails.
 * Returns NULL with errno set on failure (reported).
 */
extern struct engine *engine_open (const struct engine_config *cfg,
                                   struct backend *b);

/* Start the flusher thread (nbdkit: in after_fork, never before). */
extern int engine_start (struct engine *e);

/* Stop the flusher, then save what is pending to the state file
 * (state=FILE) or, without one or if saving fails, forward it (bounded
 * by timeout_ms); what is left is logged.  Runs once: a second call
 * does nothing.
 */
extern void engine_stop (struct engine *e, uint64_t timeout_ms);

/* Close the backend and free everything (NULL allowed).  Stops the
 * engine first if engine_stop has not run (with a state file, that
 * saves what is pending).
 */
extern void engine_close (struct engine *e);

/* The backend's size, limits and identity, and the discard granularity
 * in force (the backend's, or a coarser granularity=).
 */
extern uint64_t engine_size (const struct engine *e);
extern const struct backend_limits *engine_limits (const struct engine *e);
extern const struct backend_identity *engine_identity (const struct engine *e);
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

/* Forward every pending discard now, ignoring delay, minlen, idle and
 * rate.  Afterwards only sub-granule fragments remain.  Stores the
 * number of commands and bytes forwarded (either may be NULL).
 */
extern int engine_drain (struct engine *e, uint64_t *commands,
                         uint64_t *bytes);

/* A flush asked for from the control socket: the flusher forwards every
 * forwardable pending discard, ignoring delay, minlen, idle, rate and
 * pause, and the asker follows it without blocking anyone.
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

/* Stop or restart the flusher's forwarding (drain still works). */
extern void engine_pause (struct engine *e, bool paused);

/* Change a runtime-safe key (delay, minlen, idle, rate) while running. */
extern int engine_set (struct engine *e, const char *key, const char *value);

/* The statistics, one snapshot, in O(1): nothing walks the map. */
extern void engine_get_stats (struct engine *e, struct engine_stats *st);

#endif /* DISCARDCACHE_ENGINE_H */
