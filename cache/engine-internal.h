/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the engine's one context struct, shared by the files
 * that implement it (engine.c: lifecycle and data path; forward.c:
 * sending discards and the in-flight list; flusher.c: the thread and
 * control-socket flushes; state-file.c: the state file).
 */
#ifndef DISCARDCACHE_ENGINE_INTERNAL_H
#define DISCARDCACHE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "clean.h"
#include "engine-config.h"
#include "engine.h"
#include "extmap.h"
#include "pacing.h"

/* A discard being sent; lives on the sending thread's stack. */
struct inflight {
  uint64_t offset;
  uint64_t length;
  struct inflight *next;
};

struct engine {
  struct engine_config cfg;         /* runtime keys change under lock */
  struct backend *backend;
  uint64_t granularity;             /* resolved: never 0 */
  uint64_t chunk_limit;             /* largest single discard */

  pthread_mutex_t lock;             /* protects everything below */
  pthread_cond_t inflight_done;     /* a discard in flight completed */
  pthread_cond_t wakeup;            /* the flusher has something to look at */
  pthread_cond_t flushed;           /* flush_completed moved, or stopping */
  struct extmap *map;
  struct clean_map clean;           /* invariant 9: discarded, not written */
  struct inflight *inflight;
  uint64_t epoch_ms;                /* monotonic ms at tick 0 */
  uint64_t map_generation;          /* bumped by every insert */
  bool forwarding_disabled;         /* backend answered EOPNOTSUPP */
  bool paused;
  bool stopping;
  bool thread_running;
  pthread_t thread;
  uint64_t backoff_ms;              /* after a transient discard error */
  uint64_t retry_at_ms;
  uint64_t next_slot_ns;            /* rate limit: earliest next discard */
  struct engine_stats stats;        /* counters only; the rest is derived */
  uint64_t flush_requested;         /* control-socket flush tickets issued */
  uint64_t flush_completed;         /* ... and finished by the flusher */
  int flush_errno;                  /* why the last one stopped early, or 0 */
  bool state_saved;                 /* engine_stop wrote the state file */

  /* budget=: what is measured, and what the flusher decided last. */
  struct pace_meter pace;
  struct pace_decision pace_last;
  const char *pace_mode;            /* for the statistics */
  enum pace_mode pace_adapting;     /* the mode the next window adapts */
  uint64_t pace_next_ns;            /* earliest next paced discard */
  uint64_t forced_by_memory;        /* discards sent near max-extents */

  /* Discards being sent, and starts + ends of them: a client request
   * that saw either change ran beside one.  Updated without the lock.
   */
  atomic_uint discards_inflight;
  atomic_uint_fast64_t discard_events;

  /* Idle detection, updated without the lock on every request. */
  atomic_uint active_requests;
  atomic_uint_fast64_t last_request_ms;
};

/* Monotonic clock in milliseconds and in nanoseconds. */
extern uint64_t engine_now_ms (void);
extern uint64_t engine_now_ns (void);

/* Ticks for the extent map (ms since epoch), rebased before they wrap.
 * Call with the lock held.
 */
extern uint32_t engine_ticks (struct engine *e);

/* Send [offset, offset+length), already removed from the map, to the
 * backend in chunks, registered as in flight.  Called and returns with
 * the lock held (drops it around the I/O).  On a transient error the
 * unsent part goes back to the map at time (keep_on_error) or is counted
 * as dropped; on EOPNOTSUPP forwarding stops.  Returns 0, or -1 with
 * errno (the errno the backend gave).
 */
extern int engine_forward_locked (struct engine *e, uint64_t offset,
                                  uint64_t length, uint32_t time, bool fua,
                                  bool keep_on_error);

/* Pick the next range to forward: the largest pending extent queued at
 * or before cutoff and at least minlen long, aligned inward and limited
 * to one chunk, removed from the map.  Lock held.  False if none.
 */
extern bool engine_pick_locked (struct engine *e, uint32_t cutoff,
                                uint64_t minlen, uint64_t *offset,
                                uint64_t *length, uint32_t *time);

/* The same, limited to max_length (a multiple of the granularity). */
extern bool engine_pick_max_locked (struct engine *e, uint32_t cutoff,
                                    uint64_t minlen, uint64_t max_length,
                                    uint64_t *offset, uint64_t *length,
                                    uint32_t *time);

/* Whether [offset, offset+length) overlaps a discard in flight. */
extern bool engine_overlaps_inflight_locked (const struct engine *e,
                                             uint64_t offset,
                                             uint64_t length);

/* Sum the pending extents' aligned parts (what a flush can send now)
 * and the bytes of those too small to hold a granule.  Takes the lock
 * a batch at a time, so the totals are not a snapshot while requests
 * run: for statistics and progress only.
 */
extern void engine_sum_pending (struct engine *e, uint64_t *forwardable,
                                uint64_t *subgranule);

/* Give up every pending extent (the backend cannot discard): counted. */
extern void engine_drop_all_locked (struct engine *e);

/* Keep max-extents: forward (or drop, by policy) the oldest extents. */
extern void engine_enforce_bound_locked (struct engine *e);
/* Wait on e->wakeup for at most ms (capped at a second), lock held:
 * anything that changes what the flusher should do signals it.
 */
extern void engine_sleep_locked (struct engine *e, uint64_t ms);

/* Fill the pacing part of the statistics (flusher.c).  Lock held, and
 * the pending counts already in st.
 */
extern void engine_pace_stats_locked (struct engine *e,
                                      struct engine_stats *st);

/* The flusher thread's body. */
extern void *engine_flusher_thread (void *opaque);

/* Load the state file (state=FILE) into the map, if it matches the
 * backend, and consume it; a missing, refused or read-only one is not an
 * error.  -1 only when a state file can be neither read nor set aside,
 * as it could then be replayed after writes: the engine must not serve.
 */
extern int engine_state_load (struct engine *e);

/* Write the pending extents to the state file atomically.  0 or -1. */
extern int engine_state_save (struct engine *e);

#endif /* DISCARDCACHE_ENGINE_INTERNAL_H */
