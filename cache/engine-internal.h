/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the engine's one context struct, shared by the files
 * that implement it (engine.c: lifecycle and data path; forward.c:
 * sending discards and the in-flight list; flusher.c: the thread and
 * control-socket flushes; small.c: the small-extent policy, joins and
 * the stop's leftovers; state-file.c: the state file).
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
#include "engine-test.h"
#include "engine.h"
#include "extmap.h"
#include "lock.h"
#include "pacing.h"

/* The engine lock, for clang's analysis (common/lock.h): one capability
 * stands for e->lock of every engine.  The rules it checks
 * (docs/design-notes.md, "Locks"): fields marked GUARDED_BY
 * (engine_lock) are touched only with it held; functions marked
 * REQUIRES (engine_lock) are called only with it held and are named
 * *_locked, or *_drops_lock when they may drop and retake it (around a
 * discard's I/O, or a condition wait), so that a caller knows the state
 * may have moved; EXCLUDES (engine_lock) functions take it themselves.
 */
extern struct dc_capability engine_lock;

/* A discard being sent; lives on the sending thread's stack. */
struct inflight {
  uint64_t offset;                  /* set before it is in the list */
  uint64_t length;
  struct inflight *next GUARDED_BY (engine_lock);
};

struct engine {
  /* The keys: the runtime ones (delay, minlen, idle, rate, budget)
   * change under the lock; read the others, fixed at open, without it
   * through engine_keys.
   */
  struct engine_config cfg GUARDED_BY (engine_lock);
  /* Set at open, then only read. */
  struct backend *backend;
  uint64_t granularity;             /* resolved: never 0 */
  uint64_t chunk_limit;             /* largest single discard */
  engine_clock_fn *clock;           /* monotonic ns (engine_now_ns) */
  void *clock_opaque;

  pthread_mutex_t lock;             /* engine_lock: guards what says so */
  pthread_cond_t inflight_done;     /* a discard in flight completed */
  pthread_cond_t wakeup;            /* the flusher has something to look at */
  pthread_cond_t flushed;           /* flush_completed moved, or stopping */
  struct extmap *map PT_GUARDED_BY (engine_lock);
  struct clean_map clean GUARDED_BY (engine_lock); /* invariant 9 */
  struct inflight *inflight GUARDED_BY (engine_lock);
  uint64_t epoch_ms GUARDED_BY (engine_lock);   /* clock ms at tick 0 */
  bool forwarding_disabled GUARDED_BY (engine_lock); /* backend: EOPNOTSUPP */
  bool paused GUARDED_BY (engine_lock);
  bool stopping GUARDED_BY (engine_lock);
  uint64_t backoff_ms GUARDED_BY (engine_lock); /* after a transient error */
  uint64_t retry_at_ms GUARDED_BY (engine_lock);
  uint64_t next_slot_ns GUARDED_BY (engine_lock); /* rate: earliest next */
  uint64_t small_len GUARDED_BY (engine_lock); /* small=: held below this; 0 none */
  /* Counters only; the rest is derived. */
  struct engine_stats stats GUARDED_BY (engine_lock);
  uint64_t flush_requested GUARDED_BY (engine_lock); /* flush tickets issued */
  uint64_t flush_completed GUARDED_BY (engine_lock); /* ... and finished */
  int flush_errno GUARDED_BY (engine_lock); /* why the last one stopped early */

  /* The thread that starts and stops the engine (the service's) alone. */
  bool thread_running;
  pthread_t thread;
  bool stopped;                     /* engine_stop has run (it runs once) */
  bool state_saved;                 /* engine_stop wrote the state file */

  /* budget=: what is measured, and what the flusher decided last.  The
   * meter's client histograms are atomics, written without the lock
   * (pacing.h); the rest of it under the lock.
   */
  struct pace_meter pace;
  struct pace_decision pace_last GUARDED_BY (engine_lock);
  const char *pace_mode GUARDED_BY (engine_lock);  /* for the statistics */
  enum pace_mode pace_adapting GUARDED_BY (engine_lock); /* next window's */
  uint64_t pace_next_ns GUARDED_BY (engine_lock); /* earliest next paced */
  uint64_t forced_by_memory GUARDED_BY (engine_lock); /* near max-extents */

  /* Discards being sent, and starts + ends of them: a client request
   * that saw either change ran beside one.  Updated without the lock.
   */
  atomic_uint discards_inflight;
  atomic_uint_fast64_t discard_events;

  /* Idle detection, updated without the lock on every request. */
  atomic_uint active_requests;
  atomic_uint_fast64_t last_request_ms;
};

/* Take and give back the engine lock, and wait on one of its
 * condition variables (which drops and retakes it).
 */
static inline void
engine_lock_acquire (struct engine *e)
  ACQUIRE (engine_lock) NO_THREAD_SAFETY_ANALYSIS
{
  pthread_mutex_lock (&e->lock);
}

static inline void
engine_lock_release (struct engine *e)
  RELEASE (engine_lock) NO_THREAD_SAFETY_ANALYSIS
{
  pthread_mutex_unlock (&e->lock);
}

static inline void
engine_cond_wait_drops_lock (struct engine *e, pthread_cond_t *cond)
  REQUIRES (engine_lock)
{
  pthread_cond_wait (cond, &e->lock);
}

static inline int
engine_cond_timedwait_drops_lock (struct engine *e, pthread_cond_t *cond,
                                  const struct timespec *abstime)
  REQUIRES (engine_lock)
{
  return pthread_cond_timedwait (cond, &e->lock, abstime);
}

/* The keys fixed at open (all but delay, minlen, idle, rate and
 * budget), readable without the lock: nothing writes them after open.
 */
static inline const struct engine_config *
engine_keys (const struct engine *e) NO_THREAD_SAFETY_ANALYSIS
{
  return &e->cfg;
}

/* The engine's clock (CLOCK_MONOTONIC, or a test's), in nanoseconds
 * and in milliseconds.
 */
static inline uint64_t
engine_now_ns (const struct engine *e)
{
  return e->clock (e->clock_opaque);
}

static inline uint64_t
engine_now_ms (const struct engine *e)
{
  return engine_now_ns (e) / 1000000;
}

/* Ticks for the extent map (ms since epoch), rebased before they wrap. */
extern uint32_t engine_ticks_locked (struct engine *e) REQUIRES (engine_lock);

/* Send [offset, offset+length), already removed from the map, to the
 * backend in chunks, registered as in flight.  Called and returns with
 * the lock held (drops it around the I/O).  On a transient error the
 * unsent part goes back to the map at time (keep_on_error; moved into
 * the new epoch if the ticks were rebased meanwhile) or is counted as
 * dropped; on EOPNOTSUPP forwarding stops.  Returns 0, or -1 with
 * errno (the errno the backend gave).
 */
extern int engine_forward_drops_lock (struct engine *e, uint64_t offset,
                                      uint64_t length, uint32_t time,
                                      bool fua, bool keep_on_error)
  REQUIRES (engine_lock);

/* Pick the next range to forward: the largest pending extent queued at
 * or before cutoff, at least minlen long and holding a whole granule,
 * aligned inward and limited to one chunk, removed from the map.  Lock
 * held.  False if none.
 */
extern bool engine_pick_locked (struct engine *e, uint32_t cutoff,
                                uint64_t minlen, uint64_t *offset,
                                uint64_t *length, uint32_t *time)
  REQUIRES (engine_lock);

/* The same, limited to max_length (a multiple of the granularity).
 * Removing a range inside an extent may need a node: on ENOMEM nothing
 * is picked.
 */
extern bool engine_pick_max_locked (struct engine *e, uint32_t cutoff,
                                    uint64_t minlen, uint64_t max_length,
                                    uint64_t *offset, uint64_t *length,
                                    uint32_t *time)
  REQUIRES (engine_lock);

/* Whether [offset, offset+length) overlaps a discard in flight. */
extern bool engine_overlaps_inflight_locked (const struct engine *e,
                                             uint64_t offset,
                                             uint64_t length)
  REQUIRES (engine_lock);

/* Give up every pending extent (the backend cannot discard): counted. */
extern void engine_drop_all_locked (struct engine *e) REQUIRES (engine_lock);

/* Keep max-extents: forward (or drop, by policy) the oldest extents. */
extern void engine_enforce_bound_drops_lock (struct engine *e)
  REQUIRES (engine_lock);
/* Wait on e->wakeup for at most ms (capped at a second) of real time,
 * lock held: anything that changes what the flusher should do signals
 * it.
 */
extern void engine_sleep_drops_lock (struct engine *e, uint64_t ms)
  REQUIRES (engine_lock);

/* One turn of the flusher (engine_flusher_step without the locking):
 * the clock time of the next one.
 */
extern uint64_t engine_flusher_turn_drops_lock (struct engine *e)
  REQUIRES (engine_lock);

/* Fill the pacing part of the statistics (flusher.c).  Lock held, and
 * the pending counts already in st.
 */
extern void engine_pace_stats_locked (struct engine *e,
                                      struct engine_stats *st)
  REQUIRES (engine_lock);

/* The small-extent policy (small.c, small.h).  The threshold small=
 * gives now: its size, or for auto the cost model's (0: none).  Lock
 * held; the map is not touched.
 */
extern uint64_t engine_small_len_locked (struct engine *e)
  REQUIRES (engine_lock);

/* Bring e->small_len and the map's forwardable column (minlen and
 * small together) up to date: a walk of the map when either moved.
 */
extern void engine_small_apply_locked (struct engine *e)
  REQUIRES (engine_lock);

/* The shortest extent the flusher forwards: minlen and small=. */
extern uint64_t engine_flusher_minlen_locked (const struct engine *e)
  REQUIRES (engine_lock);

/* An explicit flush picked [*offset, *offset+*length): join the pending
 * extents that follow it across gaps the backend knows clean (discarded
 * and not written since: discarding them again loses nothing), while
 * the model says a gap costs less than the command it saves and the
 * whole stays within one chunk.  The joined extents leave the map.
 */
extern void engine_join_clean_locked (struct engine *e, uint64_t *offset,
                                      uint64_t *length)
  REQUIRES (engine_lock);

/* A stop without a saved state file: forward pending discards of at
 * least the small= threshold, largest first, until the deadline (clock
 * ms), then give up the rest, counted (dropped_small_bytes: held by
 * small=; dropped_stop_bytes: past the deadline or unsendable) and
 * logged.  Sub-granule fragments stay, as after a flush.
 */
extern void engine_stop_forward_drops_lock (struct engine *e,
                                            uint64_t deadline)
  REQUIRES (engine_lock);

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
