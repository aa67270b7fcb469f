/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the engine's one context struct, shared by the files
 * that implement it, the files of cache/engine/ (cache/engine/README.md
 * lists them).  engine.c is the top: it calls the others and none calls
 * it (tests/lint/test-cycles.sh).
 */
#ifndef DISCARDCACHE_ENGINE_INTERNAL_H
#define DISCARDCACHE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "arith.h"
#include "backend.h"
#include "breaker.h"
#include "clean.h"
#include "clock.h"
#include "engine-config.h"
#include "engine-test.h"
#include "engine.h"
#include "extmap.h"
#include "lock.h"
#include "pacing.h"
#include "proof.h"

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
  struct backend_identity saved_identity;  /* backend_saved_identity */
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
  /* Invariant 11: what holds or checks forwarding (breaker.h, proof.h,
   * window.h); space pressure (pressure below) lets the flusher forward
   * outside the windows.
   */
  struct breaker breaker GUARDED_BY (engine_lock);
  struct proof proof GUARDED_BY (engine_lock);
  /* The granularity forwarding aligns to: granularity, or more once
   * proof-adapt has raised it.
   */
  uint64_t fwd_granularity GUARDED_BY (engine_lock);
  uint64_t small_len GUARDED_BY (engine_lock); /* small=: held below this; 0 none */
  /* Counters only; the rest is derived. */
  struct engine_stats stats GUARDED_BY (engine_lock);
  uint64_t flush_requested GUARDED_BY (engine_lock); /* flush tickets issued */
  uint64_t flush_completed GUARDED_BY (engine_lock); /* ... and finished */
  int flush_errno GUARDED_BY (engine_lock); /* why the last one stopped early */

  /* Space pressure (engine-pressure.c): the last look at the backend's free
   * space, and whether it is below low-water= (or set by
   * engine_set_pressure).
   */
  bool pressure GUARDED_BY (engine_lock);
  uint64_t pressure_look_ns GUARDED_BY (engine_lock); /* next look */
  uint64_t backend_free GUARDED_BY (engine_lock);
  uint64_t backend_total GUARDED_BY (engine_lock);
  uint64_t pressure_entered GUARDED_BY (engine_lock);
  uint64_t pressure_forwarded_bytes GUARDED_BY (engine_lock);

  /* The journal of the pending set (engine-journal.c), NULL when off. */
  struct engine_journal *journal;

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
  enum pace_mode pace_mode GUARDED_BY (engine_lock); /* for the statistics */
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
DC_LOCK_WRAPPERS (engine_lock, struct engine, lock, engine_lock)

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

/* Upper bound on any one sleep on e->wakeup, so a missed signal costs
 * at most this.
 */
#define ENGINE_MAX_SLEEP_MS UINT64_C (1000)

/* Wait on e->wakeup for at most ms (capped at ENGINE_MAX_SLEEP_MS) of
 * real time, lock held: anything that changes what the flusher should
 * do signals it.
 */
static inline void
engine_sleep_drops_lock (struct engine *e, uint64_t ms)
  REQUIRES (engine_lock)
{
  struct timespec ts =
    deadline_after_ns (MIN (ms, ENGINE_MAX_SLEEP_MS) * UINT64_C (1000000));

  engine_cond_timedwait_drops_lock (e, &e->wakeup, &ts);
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

/* The pending set (engine-pending.c). */

/* Ticks for the extent map (ms since epoch), rebased before they wrap. */
extern uint32_t engine_ticks_locked (struct engine *e) REQUIRES (engine_lock);

/* Invariant 1: remove pending discards under [offset, offset+length),
 * adding the bytes removed to *cancelled, mark the range written in the
 * known-clean map, and wait out any overlapping discard in flight.
 * Takes the lock itself.  Whether either map changed (so the journal
 * has records to write through before the write goes out).
 */
extern bool engine_cancel_pending (struct engine *e, uint64_t offset,
                                   uint64_t length, uint64_t *cancelled)
  EXCLUDES (engine_lock);

/* Record a TRIM of [offset, offset+length) as pending, less what is
 * known clean (invariant 9), and wake the flusher.  May drop the lock
 * (to forward at the bound, or without memory to remember it).
 */
extern void engine_record_trim_drops_lock (struct engine *e, uint64_t offset,
                                           uint64_t length)
  REQUIRES (engine_lock);

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

/* The same as a probe of the open circuit breaker (breaker_probe_begin
 * first): its outcome alone may close the breaker.  keep_on_error.
 */
extern int engine_probe_drops_lock (struct engine *e, uint64_t offset,
                                    uint64_t length, uint32_t time)
  REQUIRES (engine_lock);

/* Invariant 11, the engine's side of the breaker, the windows and
 * proof (engine-protect.c).  At open: the breaker closed, proof set up (off
 * where the backend cannot tell, or without the known-clean map).
 */
extern void engine_protection_init_locked (struct engine *e)
  REQUIRES (engine_lock);

/* An explicit flush or the stop: an open breaker probes now. */
extern void engine_breaker_probe_now_locked (struct engine *e)
  REQUIRES (engine_lock);

/* The largest range to pick for the next discard: one chunk, or the
 * probe's size (1 MiB, whole granules) while the breaker holds.
 */
extern uint64_t engine_pick_limit_locked (struct engine *e)
  REQUIRES (engine_lock);

/* Forward a picked range, as the probe while the breaker holds. */
extern int engine_send_or_probe_drops_lock (struct engine *e, uint64_t offset,
                                            uint64_t length, uint32_t time)
  REQUIRES (engine_lock);

/* When windows let the flusher forward: now_ns if one is open (or under
 * pressure, or there are none), else when the next opens.
 */
extern uint64_t engine_window_at_ns_locked (struct engine *e, uint64_t now_ns)
  REQUIRES (engine_lock);

/* Fill the breaker's, the windows' and proof's statistics. */
extern void engine_protection_stats_locked (struct engine *e,
                                            struct engine_stats *st)
  REQUIRES (engine_lock);

/* Proof of effect: check one queued sample (engine-proof.c), lock dropped
 * around the backend's answer.  Flusher thread only.
 */
extern void engine_proof_turn_drops_lock (struct engine *e)
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

/* Keep max-extents: forward (or drop, by policy) the oldest extents
 * (engine-pending.c).
 */
extern void engine_enforce_bound_drops_lock (struct engine *e)
  REQUIRES (engine_lock);
/* One turn of the flusher (engine_flusher_step without the locking):
 * the clock time of the next one.
 */
extern uint64_t engine_flusher_turn_drops_lock (struct engine *e)
  REQUIRES (engine_lock);

/* Fill the pacing part of the statistics (engine-flusher.c).  Lock held, and
 * the pending counts already in st.
 */
extern void engine_pace_stats_locked (struct engine *e,
                                      struct engine_stats *st)
  REQUIRES (engine_lock);

/* low-water= (engine-pressure.c).  At open: refuse the key where the backend
 * cannot tell its free space.  0, or -1 reported.
 */
extern int engine_pressure_check (struct engine *e);
/* A turn of the flusher under space pressure: look at the backend's
 * free space when due (the lock dropped around it), and while it is
 * below low water forward one range whatever its age, the idle time or
 * the budget say.  The time of the next turn, or 0 when not under
 * pressure (or nothing is left to forward): the flusher goes on as
 * usual.
 */
extern uint64_t engine_pressure_turn_drops_lock (struct engine *e,
                                                 uint64_t now_ns)
  REQUIRES (engine_lock);
/* The pressure part of the statistics. */
extern void engine_pressure_stats_locked (struct engine *e,
                                          struct engine_stats *st)
  REQUIRES (engine_lock);

/* The small-extent policy (engine-small.c, small.h).  The threshold small=
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

/* Load the state file (state=FILE) alone into the map, if it matches
 * the backend, and consume it (engine.c asks the journal first); a
 * missing, refused or read-only one is not an error.  -1 only when a state file can be neither read nor set aside,
 * as it could then be replayed after writes: the engine must not serve.
 */
extern int engine_state_load (struct engine *e);

/* Write the pending extents to the state file atomically.  0 or -1. */
extern int engine_state_save (struct engine *e);

/* The state file's parts, for the journal (engine-journal.c). */
struct state_identity;
struct state_header;
/* Who the backend is now. */
extern void engine_state_identity (const struct engine *e,
                                   struct state_identity *id);
/* Both maps as a state file image (*image NULL when both are empty);
 * stamp_mtime false writes a file modification time of 0 (unknown).
 */
extern int engine_state_encode_locked (struct engine *e, bool stamp_mtime,
                                       void **image, size_t *len)
  REQUIRES (engine_lock);
/* Write image to path atomically (path.tmp, fsync, rename, fsync the
 * directory).  0, or -1 reported.
 */
extern int engine_state_write (const char *path, const void *image,
                               size_t len);
/* Read path whole: 1, 0 when it does not exist, -1 reported. */
extern int engine_state_read (const char *path, unsigned char **buf,
                              size_t *len);
/* Rename a refused file to path.rejected (said why).  0 or -1. */
extern int engine_state_reject (const char *path, const char *why);
/* Apply a checked image's extents to the maps, counted as loaded. */
extern void engine_state_apply_locked (struct engine *e, const void *image,
                                       const struct state_header *h)
  REQUIRES (engine_lock);

/* The journal of the pending set (engine-journal.c, invariant 10).  With
 * journal=on and state=FILE on a writable backend, it replaces the
 * load: the checkpoint (the state file) and the journal beside it are
 * replayed, a fresh checkpoint is written, and from then on every
 * change to the pending and known-clean maps is recorded as the maps'
 * observer sees it.  engine_journal_commit makes every change recorded
 * so far durable (a client's FLUSH, a FUA write); _begin starts that
 * on the journal's thread so that the caller's backend flush runs
 * beside it, and _wait waits for it.
 */
extern bool engine_journal_wanted (const struct engine *e);
extern int engine_journal_load (struct engine *e);
/* journal=off: if a journal is there (a start with journal=on crashed),
 * load state file and journal as with it, then remove both.  1 if it
 * did, 0 if there was no journal, -1 (reported) when it failed.
 */
extern int engine_journal_load_left (struct engine *e);
extern int engine_journal_start (struct engine *e);
extern uint64_t engine_journal_begin (struct engine *e);
extern int engine_journal_wait (struct engine *e, uint64_t ticket);
/* Where the backend's flush covers the journal's file (its records
 * written out, then the backend flushed, makes them durable: design
 * notes, "One flush for the journal and the backend"), a FLUSH calls
 * _write_out, which writes every record appended so far to the device
 * and stores in *covered the sequence they reach, then the backend's
 * flush, then, if it succeeded, _flushed with *covered.
 */
extern bool engine_journal_shares_flush (const struct engine *e);
extern int engine_journal_write_out (struct engine *e, uint64_t *covered);
/* Invariant 10, a crash of this process alone: write every record
 * appended so far into the journal's file (its page cache, no sync), so
 * that a write whose cancel they hold can go to the backend and a
 * kill -9 never replays a discard over it.  0, or -1 with errno.
 */
extern int engine_journal_write_through (struct engine *e);
extern void engine_journal_flushed (struct engine *e, uint64_t covered);
/* At a clean stop: after the state file is saved, the journal goes;
 * if it was not saved, the journal is committed as it stands.
 */
extern void engine_journal_stop (struct engine *e, bool state_saved);
extern void engine_journal_free (struct engine *e);
/* The journal's counters, into st (lock not needed). */
extern void engine_journal_stats (struct engine *e, struct engine_stats *st);

#endif /* DISCARDCACHE_ENGINE_INTERNAL_H */
