/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume's state, shared by the files that
 * implement it: thin.c (the data path), thin-order.c (request
 * ordering), thin-alloc.c (plans and the allocator's policy),
 * thin-open.c (opening, geometry, statistics), thin-meta.c (the meta
 * file on disk: commits, checkpoints, recovery) and thin-reserve.c (the
 * reuse reserve).
 *
 * Locks, in the order they are taken (never the other way round):
 *   1. commit_lock (thin_commit_lock): one commit or checkpoint at a
 *      time, and the meta file's descriptor and length; held across the
 *      journal's I/O;
 *   2. lock (thin_lock): everything else, never held across I/O;
 *   3. the engine's, inside engine.h's calls, never held on return.
 * clang's -Wthread-safety checks them as cache/ does (common/lock.h):
 * fields marked GUARDED_BY are touched only holding that lock; a
 * function that needs the thin lock is *_locked and REQUIRES it, one
 * that may drop and retake it (a condition wait, a commit) is
 * *_drops_lock, so that its caller knows the map may have moved; one
 * that takes a lock itself EXCLUDES it.  One capability object stands
 * for that lock of every thin volume (clang cannot name a sibling
 * field in C).  While a thin volume is being opened or freed nobody
 * else sees it: those functions are left out of the analysis.
 * Nothing below calls up.
 */
#ifndef DISCARDCACHE_THIN_INTERNAL_H
#define DISCARDCACHE_THIN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "lock.h"
#include "thin-pure.h"
#include "volume-internal.h"

/* An unmapped physical run whose slots are not free yet: its record may
 * not be durable, or its discard not yet handed to the engine (a slot
 * reused before that could take the late discard over its new data).
 */
struct thin_undurable {
  uint64_t seq;                     /* its record's number */
  uint32_t p, n;                    /* physical slots */
  uint32_t type;                    /* THIN_REC_UNMAP, or _KEEP (joins
                                       the reserve), or _RELEASE (left it) */
  bool recorded;                    /* engine_trim has returned (a kept
                                       run has no discard: at once) */
};

extern struct dc_capability thin_commit_lock, thin_lock;

/* Streams whose next slot the allocator keeps free for them. */
#define THIN_ACTIVE_TAILS 16

struct thin {
  struct volume v;                  /* first: thin_of casts back */
  struct engine *e;                 /* v.engine */
  struct thin_meta_id id;
  uint64_t slot;
  unsigned shift;
  char *path;                       /* meta= */
  bool read_only;

  /* One commit or checkpoint at a time, and the meta file. */
  pthread_mutex_t commit_lock;      /* thin_commit_lock */
  int fd GUARDED_BY (thin_commit_lock);
  uint64_t journal_end GUARDED_BY (thin_commit_lock); /* its length */
  /* Checkpoint past journal_limit, and journal_per_run a mapped run. */
  uint64_t journal_limit GUARDED_BY (thin_commit_lock);
  uint64_t journal_per_run GUARDED_BY (thin_commit_lock);

  pthread_mutex_t lock;             /* thin_lock: guards everything below */
  pthread_cond_t changed;           /* a request ended, slots were freed */
  struct thin_map map GUARDED_BY (thin_lock);
  struct thin_space space GUARDED_BY (thin_lock);
  /* Requests in flight (thin-order.c), reads apart: those count
   * themselves in readers[] by the parity of read_epoch, which a commit
   * turns over before it frees unmapped slots (thin-order.h).
   */
  struct thin_op *ops GUARDED_BY (thin_lock);
  unsigned read_epoch GUARDED_BY (thin_lock);
  atomic_uint_fast64_t readers[2];
  uint64_t next_ticket GUARDED_BY (thin_lock);
  /* Unmapped runs not free yet, in sequence order. */
  struct thin_undurable *undurable GUARDED_BY (thin_lock);
  size_t nundurable GUARDED_BY (thin_lock);
  size_t capundurable GUARDED_BY (thin_lock);
  uint64_t undurable_slots GUARDED_BY (thin_lock);
  /* Where recent streams continue. */
  uint64_t tails[THIN_ACTIVE_TAILS] GUARDED_BY (thin_lock);
  unsigned next_tail GUARDED_BY (thin_lock);
  /* Encoded records not on disk yet. */
  unsigned char *buf GUARDED_BY (thin_lock);
  size_t buflen GUARDED_BY (thin_lock);
  size_t bufcap GUARDED_BY (thin_lock);
  /* Older records a commit took (it writes them, holding commit_lock
   * too; a failed one leaves them there, in front of buf's).
   */
  unsigned char *taken GUARDED_BY (thin_lock);
  size_t takenlen GUARDED_BY (thin_lock);
  size_t takencap GUARDED_BY (thin_lock);
  uint64_t next_seq GUARDED_BY (thin_lock); /* the next record's number */
  uint64_t durable_seq GUARDED_BY (thin_lock); /* up to this on disk */
  /* Statistics: trims as the client sent them, and the rest. */
  uint64_t trims GUARDED_BY (thin_lock);
  uint64_t trim_bytes GUARDED_BY (thin_lock);
  uint64_t reserve_limit GUARDED_BY (thin_lock); /* slots (reserve=) */
  uint64_t reserve_writes GUARDED_BY (thin_lock); /* served from it */
  /* Reserve picks (discards never sent), and runs released from it. */
  uint64_t avoided GUARDED_BY (thin_lock);
  uint64_t avoided_slots GUARDED_BY (thin_lock);
  uint64_t released GUARDED_BY (thin_lock);
  uint64_t released_slots GUARDED_BY (thin_lock);
  uint64_t allocated GUARDED_BY (thin_lock);
  uint64_t reused GUARDED_BY (thin_lock);
  uint64_t enospc GUARDED_BY (thin_lock);
  uint64_t zero_fills GUARDED_BY (thin_lock);
  uint64_t commits GUARDED_BY (thin_lock);
  uint64_t checkpoints GUARDED_BY (thin_lock);
  uint64_t last_checkpoint GUARDED_BY (thin_lock);
  uint64_t meta_bytes GUARDED_BY (thin_lock); /* journal_end, for stats */
};

static inline struct thin *
thin_of (struct volume *v)
{
  return (struct thin *) v;
}

static inline uint64_t
phys_offset (const struct thin *t, uint64_t p)
{
  return p << t->shift;
}

/* Take and give back the thin lock and the commit lock, and wait on
 * t->changed (which drops and retakes the thin lock).
 */
DC_LOCK_WRAPPERS (thin_lock, struct thin, lock, thin_lock)
DC_LOCK_WRAPPERS (thin_commit_lock, struct thin, commit_lock, thin_commit_lock)

/* Whether it took the commit lock (false: a commit is under way). */
static inline bool
thin_commit_lock_try (struct thin *t)
  TRY_ACQUIRE (true, thin_commit_lock) NO_THREAD_SAFETY_ANALYSIS
{
  return pthread_mutex_trylock (&t->commit_lock) == 0;
}

static inline void
thin_cond_wait_drops_lock (struct thin *t)
  REQUIRES (thin_lock)
{
  pthread_cond_wait (&t->changed, &t->lock);
}

static inline void
thin_cond_timedwait_drops_lock (struct thin *t, const struct timespec *ts)
  REQUIRES (thin_lock)
{
  pthread_cond_timedwait (&t->changed, &t->lock, ts);
}

/* --- thin-meta.c --- */

/* Room for n more records (and unmap entries), so that what follows
 * cannot fail half-way.  Lock held.  0, or -1 with ENOMEM (reported).
 */
extern int thin_reserve_records_locked (struct thin *t, size_t n)
  REQUIRES (thin_lock);

/* Append a record; returns its sequence number.  Lock held, room
 * reserved.
 */
extern uint64_t thin_append_record_locked (struct thin *t, uint32_t type,
                                           uint64_t l, uint64_t n,
                                           uint32_t p)
  REQUIRES (thin_lock);

/* Make every record appended so far durable, after the data they point
 * at; then the runs they unmapped whose discard is recorded become
 * free.  client_flush: a client's FLUSH (flush-discards= applies).
 * Lock not held.
 */
extern int thin_commit (struct thin *t, bool client_flush)
  EXCLUDES (thin_commit_lock, thin_lock);

/* The same, unless a commit is under way (then 0 at once: that one, or
 * the next, takes the records).
 */
extern int thin_commit_unless_busy (struct thin *t)
  EXCLUDES (thin_commit_lock, thin_lock);

/* Load or create meta= and fill t->map and the free space, before
 * anyone else sees t.  0, or -1 (reported).
 */
extern int thin_meta_open (struct thin *t) NO_THREAD_SAFETY_ANALYSIS;

/* At a clean close: commit and write a checkpoint. */
extern void thin_meta_close (struct thin *t)
  EXCLUDES (thin_commit_lock, thin_lock);

/* --- thin-alloc.c: plans and allocation --- */

/* A run of logical slots [l, l+n) on physical [p, p+n). */
struct segment {
  uint64_t l, n;
  uint32_t p;
  bool fresh;                       /* allocated by this request */
};

struct plan {
  struct segment *seg;
  size_t n, cap;
  bool head_zero, tail_zero;        /* the first and last slot, if fresh,
                                       read as zeros already */
  bool from_reserve;                /* some fresh slots came from the
                                       reserve */
  struct segment inline_seg[8];
};

/* Pending runs freed longest ago that an allocation, and a call for the
 * statistics, check for a discard that has gone out meanwhile.
 */
#define REAP_ON_ALLOC 2
#define REAP_ON_STATS 64

extern void thin_plan_init (struct plan *pl);
extern void thin_plan_free (struct plan *pl);

/* Whether physical slots [p, p+n) read as zeros without a write: the
 * one place that decides it (see docs/design-notes.md).  Lock held.
 */
extern bool thin_reads_as_zeros_locked (struct thin *t, uint64_t p,
                                        uint64_t n)
  REQUIRES (thin_lock);

/* Move up to max pending runs whose discard has gone out to clean
 * space.  Lock held.
 */
extern void thin_reap_locked (struct thin *t, unsigned max)
  REQUIRES (thin_lock);

/* Plan [l0, l1): its mapped runs and, with alloc, new slots for its
 * gaps (else a gap is not planned).  The free slots were counted.  0,
 * or -1 (ENOMEM, reported).  Lock held.
 */
extern int thin_plan_locked (struct thin *t, struct plan *pl, uint64_t l0,
                             uint64_t l1, bool alloc)
  REQUIRES (thin_lock);

/* Plan op's write again, allocating need slots for its gaps.  Lock
 * held since the pass that counted them.
 */
extern int thin_plan_alloc_locked (struct thin *t, struct plan *pl,
                                   const struct thin_op *op, uint64_t need)
  REQUIRES (thin_lock);

/* Give the fresh slots of a plan back (the write failed).  Lock held. */
extern void thin_unreserve_locked (struct thin *t, const struct plan *pl)
  REQUIRES (thin_lock);

/* --- thin-reserve.c: the reuse reserve (reserve=, invariant 12) --- */

/* Whether unmapped runs join the reserve rather than go to the engine
 * as discards.  Lock held.
 */
extern bool thin_keeps_locked (struct thin *t) REQUIRES (thin_lock);

/* Hand the reserve's largest runs to the engine as discards until it
 * holds at most limit slots (0: all of it).  Their RELEASE records are
 * buffered and the slots become reusable at the next commit (as any
 * unmapped run whose discard is recorded).  Lock not held; 0, or -1
 * (ENOMEM, or the engine's error; reported).
 */
extern int thin_reserve_trim (struct thin *t, uint64_t limit)
  EXCLUDES (thin_lock);

/* The reserve's size now, in slots: reserve=, or 0 while the engine is
 * under space pressure (low-water=).
 */
extern uint64_t thin_reserve_limit_locked (struct thin *t)
  REQUIRES (thin_lock);

/* --- thin-meta.c: the records' durability --- */

/* A checkpoint replaces the journal when it grows past this, and past
 * JOURNAL_PER_RUN bytes a mapped run.  A checkpoint copies and encodes
 * the whole map (the copy under the lock, stalling every request), so
 * with a fixed limit its cost a write grew with the map: 4 KiB random
 * writes into a fresh 1 GiB map of 4 KiB slots paid for one every
 * 131,072 writes, each of up to 262,144 runs.  Two records a run bound
 * that to about half a run copied a record, and the replay at a start
 * to about twice as many records as the checkpoint has runs, up to
 * JOURNAL_MAX (2M records; the meta file must stay under 4 GiB).
 */
#define JOURNAL_LIMIT (4 * 1024 * 1024)
#define JOURNAL_PER_RUN (2 * THIN_RECORD_SIZE)
#define JOURNAL_MAX (UINT64_C (64) << 20)

/* The unmaps and releases numbered first_seq to last_seq have their
 * discard in the engine: the commit that makes them durable frees their
 * slots.  Lock held.
 */
extern void thin_mark_recorded_locked (struct thin *t, uint64_t first_seq,
                                       uint64_t last_seq)
  REQUIRES (thin_lock);

/* --- thin-open.c --- */

/* Whether the journal has grown enough for a checkpoint (thin-meta.c).
 * Both locks held.
 */
extern bool thin_journal_full_locked (struct thin *t)
  REQUIRES (thin_commit_lock, thin_lock);

/* --- thin.c: the data path, volume.h's semantics --- */

extern int thin_pread (struct volume *v, void *buf, uint32_t count,
                       uint64_t offset) EXCLUDES (thin_lock);
extern int thin_pwrite (struct volume *v, const void *buf, uint32_t count,
                        uint64_t offset, bool fua)
  EXCLUDES (thin_commit_lock, thin_lock);
extern int thin_zero (struct volume *v, uint64_t offset, uint64_t length,
                      bool may_trim, bool fua, bool fast)
  EXCLUDES (thin_commit_lock, thin_lock);
extern int thin_trim (struct volume *v, uint64_t offset, uint64_t length,
                      bool fua) EXCLUDES (thin_commit_lock, thin_lock);
extern int thin_flush (struct volume *v)
  EXCLUDES (thin_commit_lock, thin_lock);
extern int thin_extents (struct volume *v, uint64_t offset, uint64_t length,
                         backend_extent_fn fn, void *opaque)
  EXCLUDES (thin_lock);

#endif /* DISCARDCACHE_THIN_INTERNAL_H */
