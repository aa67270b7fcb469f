/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume's state, shared by the files that
 * implement it: thin.c (the data path), thin-order.c (request
 * ordering), thin-alloc.c (plans and the allocator's policy),
 * thin-open.c (opening, geometry, statistics) and thin-meta.c (the meta
 * file on disk: commits, checkpoints, recovery).
 *
 * Locks: commit_lock (one commit or checkpoint at a time, and the meta
 * file's descriptor), then lock (everything else, never held across
 * I/O), then the engine's.  Nothing below calls up.
 */
#ifndef DISCARDCACHE_THIN_INTERNAL_H
#define DISCARDCACHE_THIN_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "thin.h"
#include "volume-internal.h"

/* An unmapped physical run whose slots are not free yet: its record may
 * not be durable, or its discard not yet handed to the engine (a slot
 * reused before that could take the late discard over its new data).
 */
struct thin_undurable {
  uint64_t seq;                     /* its UNMAP record's number */
  uint32_t p, n;                    /* physical slots */
  uint32_t type;                    /* THIN_REC_UNMAP, or _KEEP (joins
                                       the reserve), or _RELEASE (left it) */
  bool recorded;                    /* engine_trim has returned (a kept
                                       run has no discard: at once) */
};

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

  pthread_mutex_t commit_lock;      /* one commit or checkpoint at a time; */
  int fd;                           /* the meta file, written under it */
  uint64_t journal_end;             /* its length */
  uint64_t journal_limit;           /* checkpoint past this, */
  uint64_t journal_per_run;         /* and this much a mapped run */

  pthread_mutex_t lock;             /* guards everything below */
  pthread_cond_t changed;           /* a request ended, slots were freed */
  struct thin_map map;
  struct thin_space space;
  struct thin_op *ops;              /* requests in flight (thin-order.c) */
  uint64_t next_ticket;
  struct thin_undurable *undurable; /* in sequence order */
  size_t nundurable, capundurable;
  uint64_t undurable_slots;
  uint64_t tails[THIN_ACTIVE_TAILS]; /* where recent streams continue */
  unsigned next_tail;
  unsigned char *buf;               /* encoded records not on disk yet */
  size_t buflen, bufcap;
  unsigned char *taken;             /* ... older ones a commit took (and */
  size_t takenlen, takencap;        /* writes; left by a failed one) */
  uint64_t next_seq;                /* the next record's number */
  uint64_t durable_seq;             /* records up to this are on disk */
  uint64_t trims, trim_bytes;       /* as the client sent them */
  uint64_t reserve_limit;           /* slots the reserve keeps (reserve=) */
  uint64_t reserve_writes;          /* writes served from the reserve */
  uint64_t avoided, avoided_slots;  /* reserve picks: discards not sent */
  uint64_t released, released_slots; /* reserve runs handed to the engine */
  uint64_t allocated, reused, enospc, zero_fills, commits, checkpoints;
  uint64_t last_checkpoint;
  uint64_t meta_bytes;              /* journal_end, for stats */
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

/* --- thin-meta.c --- */

/* Room for n more records (and unmap entries), so that what follows
 * cannot fail half-way.  Lock held.  0, or -1 with ENOMEM (reported).
 */
extern int thin_reserve_records_locked (struct thin *t, size_t n);

/* Append a record; returns its sequence number.  Lock held, room
 * reserved.
 */
extern uint64_t thin_append_record_locked (struct thin *t, uint32_t type,
                                           uint64_t l, uint64_t n,
                                           uint32_t p);

/* Make every record appended so far durable, after the data they point
 * at; then the runs they unmapped whose discard is recorded become
 * free.  client_flush: a client's FLUSH (flush-discards= applies).
 * Lock not held.
 */
extern int thin_commit (struct thin *t, bool client_flush);

/* The same, unless a commit is under way (then 0 at once: that one, or
 * the next, takes the records).
 */
extern int thin_commit_unless_busy (struct thin *t);

/* Load or create meta= and fill t->map and the free space.  0, or -1
 * (reported).
 */
extern int thin_meta_open (struct thin *t);

/* At a clean close: commit and write a checkpoint. */
extern void thin_meta_close (struct thin *t);

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
                                        uint64_t n);

/* Move up to max pending runs whose discard has gone out to clean
 * space.  Lock held.
 */
extern void thin_reap_locked (struct thin *t, unsigned max);

/* Plan [l0, l1): its mapped runs and, with alloc, new slots for its
 * gaps (else a gap is not planned).  The free slots were counted.  0,
 * or -1 (ENOMEM, reported).  Lock held.
 */
extern int thin_plan_locked (struct thin *t, struct plan *pl, uint64_t l0,
                             uint64_t l1, bool alloc);

/* Plan op's write again, allocating need slots for its gaps.  Lock
 * held since the pass that counted them.
 */
extern int thin_plan_alloc_locked (struct thin *t, struct plan *pl,
                                   const struct thin_op *op, uint64_t need);

/* Give the fresh slots of a plan back (the write failed).  Lock held. */
extern void thin_unreserve_locked (struct thin *t, const struct plan *pl);

/* --- thin-reserve.c: the reuse reserve (reserve=, invariant 12) --- */

/* Whether unmapped runs join the reserve rather than go to the engine
 * as discards.  Lock held.
 */
extern bool thin_keeps_locked (const struct thin *t);

/* Hand the reserve's largest runs to the engine as discards until it
 * holds at most limit slots (0: all of it).  Their RELEASE records are
 * buffered and the slots become reusable at the next commit (as any
 * unmapped run whose discard is recorded).  Lock not held; 0, or -1
 * (ENOMEM, or the engine's error; reported).
 */
extern int thin_reserve_trim (struct thin *t, uint64_t limit);

/* The reserve's size now: its limit, or 0 under space pressure. */
extern uint64_t thin_reserve_limit_locked (const struct thin *t);

/* --- thin.c --- */

/* The unmaps and releases numbered first_seq to last_seq have their
 * discard in the engine: the commit that makes them durable frees their
 * slots.  Lock held.
 */
extern void thin_mark_recorded_locked (struct thin *t, uint64_t first_seq,
                                       uint64_t last_seq);

/* --- thin-open.c --- */

/* Whether the journal has grown enough for a checkpoint.  Both locks
 * held.
 */
extern bool thin_journal_full_locked (struct thin *t);

/* --- thin.c: the data path, volume.h's semantics --- */

extern int thin_pread (struct volume *v, void *buf, uint32_t count,
                       uint64_t offset);
extern int thin_pwrite (struct volume *v, const void *buf, uint32_t count,
                        uint64_t offset, bool fua);
extern int thin_zero (struct volume *v, uint64_t offset, uint64_t length,
                      bool may_trim, bool fua, bool fast);
extern int thin_trim (struct volume *v, uint64_t offset, uint64_t length,
                      bool fua);
extern int thin_flush (struct volume *v);
extern int thin_extents (struct volume *v, uint64_t offset, uint64_t length,
                         backend_extent_fn fn, void *opaque);

#endif /* DISCARDCACHE_THIN_INTERNAL_H */
