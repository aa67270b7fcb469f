/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume's data path (see thin-volume.h; the map,
 * the free space and the format are in thin.h, the meta file on disk in
 * thin-meta.c).  Design: docs/design-notes.md, "Thin mode".
 *
 * Each request is planned under the thin lock as segments: runs of
 * logical slots on consecutive physical slots, mapped or newly
 * allocated; the I/O then goes to the engine (engine.h's data path) at
 * physical addresses, one call per physical run, so pending-discard
 * cancellation, alignment, batching and the rate limit all apply as in
 * identity mode.  The lock is never held across I/O; the order is thin,
 * then engine.
 *
 * A request in flight is a struct thin_op over its logical slots, on the
 * requester's stack, in a list as long as the requests in flight.  Each
 * op waits for the older ops it conflicts with: reads and writes into
 * mapped slots go together; an op that allocates slots (a write into a
 * gap) or unmaps them waits for every older op over its slots and holds
 * back every newer one.  So an unmap never frees a physical slot that a
 * request is still reading or writing, and no two writers allocate the
 * same logical slot.
 *
 * A write that needs slots reserves all of them before it writes
 * anything: one that the pool cannot serve fails with ENOSPC having
 * changed nothing (invariant 7).  New slots get their map records only
 * after their data (and zero-fill) is written, and a commit flushes the
 * backend before it writes records: a durable mapping always points at
 * flushed data.  An unmapped run becomes reusable only once its UNMAP
 * record is durable and its discard handed to the engine.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arith.h"
#include "engine.h"
#include "grow.h"
#include "le.h"
#include "log.h"
#include "thin-internal.h"
#include "thin-volume.h"

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
/* Records buffered before a commit is started (one writer runs it, the
 * others go on): BUFFER_LIMIT, or a record a mapped run up to
 * BUFFER_MAX; twice that, and at least BUFFER_WAIT_MIN, before every
 * writer waits for one (the memory bound).  Durability comes with the
 * client's FLUSH and FUA, so the bound is for memory only; and a commit
 * flushes the backend, which on a file writes back every dirty page:
 * with 256 KiB alone, 4 KiB random writes filling a 1 GiB map paid for
 * 32 such flushes that identity mode never asks for (0.86x its IOPS
 * here; one commit: 0.95x).  Waiting records cost a record (32 bytes) a
 * run, up to twice that if commits fall behind.
 */
#define BUFFER_LIMIT (UINT64_C (256) << 10)
#define BUFFER_MAX (UINT64_C (32) << 20)
#define BUFFER_WAIT_MIN (UINT64_C (1) << 20)
/* Pending runs freed longest ago that an allocation, and a call for the
 * statistics, check for a discard that has gone out meanwhile.
 */
#define REAP_ON_ALLOC 2
#define REAP_ON_STATS 64
/* Best-fit picks whose discard turned out to be gone that one
 * allocation moves to clean space before it takes clean space itself.
 */
#define VERIFY_MAX 32
/* Mapped runs a large unmap takes per hold of the lock. */
#define UNMAP_BATCH 256

static struct thin *
thin_of (struct volume *v)
{
  return (struct thin *) v;
}

static uint64_t
phys_offset (const struct thin *t, uint64_t p)
{
  return p << t->shift;
}

/* Whether the engine still holds a discard over physical [p, p+n). */
static bool
discard_pending (struct thin *t, uint64_t p, uint64_t n)
{
  return engine_discard_pending (t->e, phys_offset (t, p), n << t->shift);
}

/* Known to read as zeros: what the backend's extents said at start,
 * untouched since (thin-meta.c, backend_zeros), or what the engine knows
 * clean (discarded, nothing written since) on a backend whose discard
 * zeroes (a file's punched hole).  Neither outlives a kill -9: the
 * extents are asked afresh at each start, and the engine's known-clean
 * map starts empty after one.
 */
bool
thin_reads_as_zeros_locked (struct thin *t, uint64_t p, uint64_t n)
{
  return thin_space_is_zero (&t->space, p, n) ||
         (engine_limits (t->e)->discard_zeroes &&
          engine_known_clean (t->e, phys_offset (t, p), n << t->shift));
}

/* Requests in flight. */

enum op_kind {
  OP_IO,                            /* reads and writes mapped slots */
  OP_SETUP,                         /* allocates slots */
  OP_UNMAP,                         /* unmaps slots */
};

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
  struct segment inline_seg[8];
};

struct thin_op {
  struct thin_op *next;
  uint64_t ticket;                  /* older ops have smaller ones */
  uint64_t l0, l1;                  /* logical slots */
  enum op_kind kind;
  const struct plan *plan;          /* OP_SETUP: where its slots go */
};

static bool
conflicts (const struct thin_op *a, const struct thin_op *b)
{
  return a->l0 < b->l1 && b->l0 < a->l1 &&
         (a->kind != OP_IO || b->kind != OP_IO);
}

/* Wait until no older op conflicts with op.  Returns whether it had to
 * (the lock was dropped meanwhile).
 */
static bool
op_wait_locked (struct thin *t, const struct thin_op *op)
{
  bool waited = false;

  for (;;) {
    const struct thin_op *o;

    for (o = t->ops; o != NULL; o = o->next)
      if (o->ticket < op->ticket && conflicts (o, op))
        break;
    if (o == NULL)
      return waited;
    pthread_cond_wait (&t->changed, &t->lock);
    waited = true;
  }
}

static void
op_begin_locked (struct thin *t, struct thin_op *op, uint64_t l0, uint64_t l1,
                 enum op_kind kind)
{
  *op = (struct thin_op) {
    .next = t->ops, .ticket = t->next_ticket++, .l0 = l0, .l1 = l1,
    .kind = kind,
  };
  t->ops = op;
  op_wait_locked (t, op);
}

static void
op_end_locked (struct thin *t, struct thin_op *op)
{
  struct thin_op **pp;

  for (pp = &t->ops; *pp != op; pp = &(*pp)->next)
    ;
  *pp = op->next;
  pthread_cond_broadcast (&t->changed);
}

/* The logical slots of [offset, offset+length). */
static void
slot_range (const struct thin *t, uint64_t offset, uint64_t length,
            uint64_t *l0, uint64_t *l1)
{
  *l0 = offset >> t->shift;
  *l1 = ((offset + length - 1) >> t->shift) + 1;
}

/* Call fn for each run of [offset, offset+length): bytes [pos, to) on
 * mapped slots from physical slot p on (mapped), or on unmapped ones;
 * looked up under the lock, called without it, until fn fails.  The
 * caller's op keeps the runs from being unmapped meanwhile.
 */
typedef int (*run_fn) (struct thin *t, uint64_t pos, uint64_t to,
                       bool mapped, uint32_t p, void *arg);

static int
for_each_run (struct thin *t, uint64_t offset, uint64_t length, run_fn fn,
              void *arg)
{
  uint64_t end = offset + length, l0, l1, n;

  slot_range (t, offset, length, &l0, &l1);
  for (uint64_t pos = offset; pos < end; ) {
    uint64_t l = pos >> t->shift, to;
    uint32_t p = 0;
    bool mapped;

    pthread_mutex_lock (&t->lock);
    mapped = thin_map_lookup (&t->map, l, l1 - l, &p, &n);
    pthread_mutex_unlock (&t->lock);
    to = MIN (end, (l + n) << t->shift);
    if (fn (t, pos, to, mapped, p, arg) == -1)
      return -1;
    pos = to;
  }
  return 0;
}

/* The physical address of byte pos of a run starting at slot p. */
static uint64_t
run_address (const struct thin *t, uint32_t p, uint64_t pos)
{
  return phys_offset (t, p) + (pos & (t->slot - 1));
}

/* Plans. */

static void
plan_init (struct plan *pl)
{
  pl->seg = pl->inline_seg;
  pl->n = 0;
  pl->cap = sizeof pl->inline_seg / sizeof pl->inline_seg[0];
  pl->head_zero = pl->tail_zero = false;
}

static void
plan_free (struct plan *pl)
{
  if (pl->seg != pl->inline_seg)
    free (pl->seg);
}

/* Append a segment, joined to the last one when both continue. */
static int
plan_push (struct plan *pl, uint64_t l, uint64_t n, uint32_t p, bool fresh)
{
  struct segment *last = pl->n ? &pl->seg[pl->n - 1] : NULL;

  if (last && last->fresh == fresh && last->l + last->n == l &&
      (uint64_t) last->p + last->n == p) {
    last->n += n;
    return 0;
  }
  if (pl->n == pl->cap) {
    struct segment *s;

    if (pl->seg == pl->inline_seg) {
      s = malloc (2 * pl->cap * sizeof *s);
      if (s != NULL)
        memcpy (s, pl->seg, pl->n * sizeof *s);
      pl->cap *= 2;
    }
    else
      s = grow_array (pl->seg, &pl->cap, sizeof *s, 16);
    if (s == NULL) {
      dc_error ("thin: out of memory planning a request");
      errno = ENOMEM;
      return -1;
    }
    pl->seg = s;
  }
  pl->seg[pl->n++] = (struct segment) { l, n, p, fresh };
  return 0;
}

/* Allocation. */

/* The pending run x no longer has a discard in the engine (it went out,
 * or was dropped): it is clean space now.
 */
static void
settle_locked (struct thin *t, const struct extent *x)
{
  bool zero = thin_reads_as_zeros_locked (t, x->offset, x->length);

  if (thin_space_take (&t->space, x->offset, x->length) == 0)
    thin_space_add_clean (&t->space, x->offset, x->length, zero);
}

/* Check the pending runs freed longest ago, at most max of them. */
static void
reap_locked (struct thin *t, unsigned max)
{
  struct extent x;

  while (max-- > 0 && thin_space_oldest_pending (&t->space, &x) &&
         !discard_pending (t, x.offset, x.length))
    settle_locked (t, &x);
}

/* The physical slot that continues logical slot l-1, if l-1 is mapped
 * or being set up by another request: THIN_MAX_PHYS if none.
 */
static uint64_t
goal_after_locked (struct thin *t, uint64_t l)
{
  uint64_t n;
  uint32_t p;

  if (l == 0)
    return THIN_MAX_PHYS;
  if (thin_map_lookup (&t->map, l - 1, 1, &p, &n))
    return (uint64_t) p + 1;
  for (const struct thin_op *o = t->ops; o != NULL; o = o->next) {
    if (o->kind != OP_SETUP || o->plan == NULL || l - 1 < o->l0 ||
        l - 1 >= o->l1)
      continue;
    for (size_t i = 0; i < o->plan->n; i++) {
      const struct segment *s = &o->plan->seg[i];

      if (l - 1 >= s->l && l - 1 < s->l + s->n)
        return (uint64_t) s->p + (l - s->l);
    }
  }
  return THIN_MAX_PHYS;
}

/* Active streams: the physical slots where the last few runs allocated
 * would continue.  A new stream does not start there, or two streams
 * written in turn (a file's data and the filesystem's metadata) would
 * take every other slot and neither would be contiguous.
 */
static bool
is_tail (const struct thin *t, uint64_t p)
{
  for (unsigned i = 0; i < THIN_ACTIVE_TAILS; i++)
    if (t->tails[i] == p)
      return true;
  return false;
}

/* A run was allocated up to tail, continuing the stream whose tail was
 * from (THIN_MAX_PHYS: a new stream).
 */
static void
note_tail (struct thin *t, uint64_t from, uint64_t tail)
{
  for (unsigned i = 0; i < THIN_ACTIVE_TAILS; i++)
    if (t->tails[i] == from) {
      t->tails[i] = tail;
      return;
    }
  t->tails[t->next_tail++ % THIN_ACTIVE_TAILS] = tail;
}

/* The free run that starts at goal, if there is one, and its set. */
static enum thin_free_kind
run_at_goal (struct thin *t, uint64_t goal, struct extent *x)
{
  enum thin_free_kind kind;

  if (goal >= t->map.nphys)
    return THIN_NOT_FREE;
  kind = thin_space_find (&t->space, goal, x);
  return kind != THIN_NOT_FREE && x->offset == goal ? kind : THIN_NOT_FREE;
}

/* Choose up to want free slots for a run of logical slots whose
 * predecessor sits at physical goal (THIN_MAX_PHYS: none):
 *   1. the slots right after goal if they are pending: a logically
 *      contiguous stream stays physically contiguous, and cancels a
 *      discard;
 *   2. other pending slots, best fit by run length (a whole run or an
 *      end of one, never its middle; the most recently freed among
 *      equals), since a write there cancels their discard;
 *   3. the clean slots right after goal;
 *   4. clean slots from the largest clean run (the largest known to
 *      read as zeros if it holds the request: no zero-fill there).
 * Reuse comes before contiguity into clean space: on XFS churns, a
 * stream that went on into clean space while freed runs waited left
 * twice the discards at the end (docs/design-notes.md, "Thin mode").
 * A new stream leaves an active stream's next slot alone where it can:
 * it takes the far end of a longer pending run, or the second half of
 * the largest clean run.  There are free slots (the caller counted
 * them).
 */
struct choice {
  uint32_t p;                       /* the first slot */
  uint64_t k;                       /* how many, 1 <= k <= want */
  bool pending;                     /* they had a discard pending */
  enum thin_free_kind kind;         /* the set, and the run, they are in */
  struct extent run;
};

static void
choose_locked (struct thin *t, uint64_t goal, uint64_t want,
               struct choice *c)
{
  enum thin_free_kind at_goal;
  uint64_t at, from_goal;
  struct extent x, g;

  /* (Settling pending runs below can only make a clean run at goal
   * longer: g stays true.)
   */
  at_goal = run_at_goal (t, goal, &g);
  if (at_goal == THIN_PENDING) {
    *c = (struct choice) {
      .p = (uint32_t) goal, .k = MIN (want, g.length), .kind = at_goal,
      .run = g,
    };
    c->pending = discard_pending (t, goal, c->k);
    note_tail (t, goal, goal + c->k);
    return;
  }
  c->pending = false;
  for (unsigned i = 0; i < VERIFY_MAX &&
         thin_space_best_pending (&t->space, want, &x); i++) {
    if (discard_pending (t, x.offset, x.length)) {
      c->pending = true;
      break;
    }
    settle_locked (t, &x);
  }
  if (c->pending) {
    c->kind = THIN_PENDING;
    c->k = MIN (want, x.length);
    at = x.length > c->k && is_tail (t, x.offset)
         ? x.offset + x.length - c->k : x.offset;
    from_goal = THIN_MAX_PHYS;
  }
  else if (at_goal != THIN_NOT_FREE) {
    c->kind = at_goal;
    x = g;
    at = goal;
    c->k = MIN (want, g.length);
    from_goal = goal;
  }
  else {
    c->kind = thin_space_largest_clean (&t->space, want, &x);
    if (c->kind == THIN_NOT_FREE)
      abort ();                     /* the caller counted the free slots */
    at = x.length > 1 && is_tail (t, x.offset)
         ? x.offset + x.length / 2 : x.offset;
    c->k = MIN (want, x.offset + x.length - at);
    from_goal = THIN_MAX_PHYS;
  }
  c->p = (uint32_t) at;
  c->run = x;
  note_tail (t, from_goal, at + c->k);
}


/* Give the fresh slots of a plan back (the write failed): they may hold
 * anything, so they are clean but not zero.
 */
static void
unreserve_locked (struct thin *t, const struct plan *pl)
{
  for (size_t i = 0; i < pl->n; i++)
    if (pl->seg[i].fresh)
      thin_space_add_clean (&t->space, pl->seg[i].p, pl->seg[i].n, false);
}

/* Allocate the gap [l, l+n) of a plan, run by run.  Never fails for want
 * of slots (counted before); -1 only for want of memory, with the slots
 * taken so far left in the plan.
 */
static int
allocate_gap_locked (struct thin *t, struct plan *pl, uint64_t l, uint64_t n,
                     uint64_t l0, uint64_t l1)
{
  const struct segment *prev = pl->n ? &pl->seg[pl->n - 1] : NULL;
  uint64_t goal = prev && prev->l + prev->n == l
                  ? (uint64_t) prev->p + prev->n : goal_after_locked (t, l);

  while (n > 0) {
    struct choice c;

    choose_locked (t, goal, n, &c);
    if (l == l0)
      pl->head_zero = c.kind == THIN_ZERO ||
                      thin_reads_as_zeros_locked (t, c.p, 1);
    if (l + c.k == l1)
      pl->tail_zero = l + c.k - 1 == l0 ? pl->head_zero
                      : c.kind == THIN_ZERO ||
                        thin_reads_as_zeros_locked (t, c.p + c.k - 1, 1);
    if (thin_space_take_from (&t->space, c.kind, &c.run, c.p, c.k) == -1 ||
        plan_push (pl, l, c.k, c.p, true) == -1) {
      dc_error ("thin: out of memory allocating slots");
      return -1;
    }
    t->reused += c.pending ? c.k : 0;
    goal = (uint64_t) c.p + c.k;
    l += c.k;
    n -= c.k;
  }
  return 0;
}

/* Plan [l0, l1): its mapped runs and, with alloc, new slots for its
 * gaps (else a gap is not planned).  The free slots were counted.
 */
static int
plan_locked (struct thin *t, struct plan *pl, uint64_t l0, uint64_t l1,
             bool alloc)
{
  uint64_t n;
  uint32_t p;

  if (alloc)
    reap_locked (t, REAP_ON_ALLOC);
  for (uint64_t l = l0; l < l1; l += n) {
    if (thin_map_lookup (&t->map, l, l1 - l, &p, &n)) {
      if (plan_push (pl, l, n, p, false) == -1)
        return -1;
    }
    else if (alloc && allocate_gap_locked (t, pl, l, n, l0, l1) == -1)
      return -1;
  }
  return 0;
}

/* Writes. */

/* Wait a little for the unmaps whose discard is being handed to the
 * engine: a commit frees them once that is done.
 */
static void
wait_unrecorded_locked (struct thin *t)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += 10000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_cond_timedwait (&t->changed, &t->lock, &ts);
}

static int
enospc_locked (struct thin *t)
{
  if (t->enospc++ == 0)
    dc_error ("thin: no free slot left in the pool of %" PRIu64 " (%" PRIu64
              " bytes): writes needing new slots fail with ENOSPC until "
              "something is trimmed (counted as thin_enospc)",
              t->map.nphys, t->map.nphys << t->shift);
  errno = ENOSPC;
  return -1;
}

/* Plan op's write again, allocating its gaps (need slots in all).  The
 * lock was held since the pass that counted them, so the map is as it
 * found it: a write wholly into a gap (any write into fresh space of at
 * most a slot) skips a second lookup, which in a map of many runs costs
 * as much as the allocation.
 */
static int
plan_alloc_locked (struct thin *t, struct plan *pl, const struct thin_op *op,
                   uint64_t need)
{
  pl->n = 0;
  if (need < op->l1 - op->l0)
    return plan_locked (t, pl, op->l0, op->l1, true);
  reap_locked (t, REAP_ON_ALLOC);
  return allocate_gap_locked (t, pl, op->l0, need, op->l0, op->l1);
}

/* Plan a write over [l0, l1), reserving every slot it needs first.
 * Returns 1 with the plan (op is OP_SETUP if it allocated), 0 if no
 * slot is needed, or -1 (ENOSPC having changed nothing, or the commit's
 * error).  Lock held; dropped during a commit.
 */
static int
plan_write_locked (struct thin *t, struct thin_op *op, struct plan *pl)
{
  for (;;) {
    uint64_t need = op->l1 - op->l0;
    bool recorded = true;
    int r;

    /* The mapped runs first: a write into mapped slots needs no more. */
    pl->n = 0;
    if (plan_locked (t, pl, op->l0, op->l1, false) == -1)
      return -1;
    for (size_t i = 0; i < pl->n; i++)
      need -= pl->seg[i].n;
    if (need == 0)
      return 0;
    /* Allocating: wait for the older ops over these slots; if it had
     * to, they may have changed the map.
     */
    if (op->kind != OP_SETUP) {
      op->kind = OP_SETUP;
      if (op_wait_locked (t, op))
        continue;
    }
    if (need <= thin_space_slots (&t->space)) {
      op->plan = pl;
      if (plan_alloc_locked (t, pl, op, need) == -1) {
        unreserve_locked (t, pl);
        return -1;
      }
      return 1;
    }
    if (need > thin_space_slots (&t->space) + t->undurable_slots)
      return enospc_locked (t);
    /* Unmaps a commit can make free. */
    for (size_t i = 0; i < t->nundurable; i++)
      recorded &= t->undurable[i].recorded;
    pthread_mutex_unlock (&t->lock);
    r = thin_commit (t, false);
    pthread_mutex_lock (&t->lock);
    if (r == -1)
      return -1;
    if (!recorded)
      wait_unrecorded_locked (t);
  }
}

/* Zero the parts of fresh slot l that the write [offset, end) does not
 * cover, unless it reads as zeros already: one request a slot.
 */
static int
fill_slot (struct thin *t, uint64_t l, uint32_t p, uint64_t offset,
           uint64_t end, unsigned *fills)
{
  uint64_t base = l << t->shift;
  uint64_t lo = MAX (offset, base) - base, hi = MIN (end, base + t->slot) - base;
  uint64_t from, to;

  if (lo == 0 && hi == t->slot)
    return 0;
  if (lo > 0 && hi < t->slot)
    from = 0, to = t->slot;
  else if (lo > 0)
    from = 0, to = lo;
  else
    from = hi, to = t->slot;
  (*fills)++;
  return engine_zero (t->e, phys_offset (t, p) + from, to - from, true,
                      false, false);
}

/* The first and last slots of a write, if fresh and partly covered,
 * are zero-filled first (the others are covered whole).
 */
static int
fill_ends (struct thin *t, const struct plan *pl, uint64_t offset,
           uint64_t end, unsigned *fills)
{
  const struct segment *first = &pl->seg[0], *last = &pl->seg[pl->n - 1];
  uint64_t l0 = offset >> t->shift, l1 = ((end - 1) >> t->shift) + 1;

  if (first->fresh && !pl->head_zero &&
      fill_slot (t, l0, first->p, offset, end, fills) == -1)
    return -1;
  if (l1 - 1 != l0 && last->fresh && !pl->tail_zero &&
      fill_slot (t, l1 - 1, last->p + (uint32_t) last->n - 1, offset, end,
                 fills) == -1)
    return -1;
  return 0;
}

/* One backend write per run of physically consecutive segments. */
static int
write_plan (struct thin *t, const struct plan *pl, const char *buf,
            uint64_t offset, uint64_t end, bool fua)
{
  for (size_t i = 0, j; i < pl->n; i = j) {
    uint64_t from, to;

    for (j = i + 1; j < pl->n &&
           pl->seg[j].p == (uint64_t) pl->seg[j - 1].p + pl->seg[j - 1].n;
         j++)
      ;
    from = MAX (offset, pl->seg[i].l << t->shift);
    to = MIN (end, (pl->seg[j - 1].l + pl->seg[j - 1].n) << t->shift);
    if (engine_pwrite (t->e, buf + (from - offset), (uint32_t) (to - from),
                       phys_offset (t, pl->seg[i].p) +
                       (from - (pl->seg[i].l << t->shift)), fua) == -1)
      return -1;
  }
  return 0;
}

/* The write is done: its fresh runs are mapped and journaled (room for
 * the records was reserved), or, if it failed, given back.
 */
static int
finish_write_locked (struct thin *t, const struct plan *pl, int r)
{
  if (r == 0 && thin_reserve_records_locked (t, pl->n) == -1)
    r = -1;
  for (size_t i = 0; i < pl->n; i++) {
    const struct segment *s = &pl->seg[i];

    if (!s->fresh)
      continue;
    if (r == 0 && thin_map_add (&t->map, s->l, s->n, s->p) == 0) {
      thin_append_record_locked (t, THIN_REC_MAP, s->l, s->n, s->p);
      t->allocated += s->n;
      continue;
    }
    if (r == 0)
      dc_error ("thin: out of memory mapping slots");
    r = -1;
    thin_space_add_clean (&t->space, s->p, s->n, false);
  }
  return r;
}

/* What commit a request needs: one when records wait and the request
 * needs durability (FUA), or when the buffer has grown past its bound.
 * Past the soft bound one writer commits and the others go on: with
 * 4 KiB slots every write into fresh space adds a record, and writers
 * queueing behind each commit's backend flush cost random writes on a
 * file half their IOPS.  Lock held.
 */
enum commit_need { COMMIT_NONE, COMMIT_UNLESS_BUSY, COMMIT_NOW };

static enum commit_need
commit_needed_locked (struct thin *t, bool fua)
{
  uint64_t limit = MAX (BUFFER_LIMIT,
                        MIN (thin_map_runs (&t->map) * THIN_RECORD_SIZE,
                             BUFFER_MAX));

  if ((fua && t->durable_seq + 1 < t->next_seq) ||
      t->buflen >= MAX (BUFFER_WAIT_MIN, 2 * limit))
    return COMMIT_NOW;
  return t->buflen >= limit ? COMMIT_UNLESS_BUSY : COMMIT_NONE;
}

static int
commit_as_needed (struct thin *t, enum commit_need need)
{
  switch (need) {
  case COMMIT_NOW: return thin_commit (t, false);
  case COMMIT_UNLESS_BUSY: return thin_commit_unless_busy (t);
  case COMMIT_NONE: break;
  }
  return 0;
}

static int
commit_if_needed (struct thin *t, bool fua)
{
  enum commit_need need;

  pthread_mutex_lock (&t->lock);
  need = commit_needed_locked (t, fua);
  pthread_mutex_unlock (&t->lock);
  return commit_as_needed (t, need);
}

static int
thin_pwrite (struct volume *v, const void *buf, uint32_t count,
             uint64_t offset, bool fua)
{
  struct thin *t = thin_of (v);
  uint64_t end = offset + count, l0, l1;
  enum commit_need need;
  unsigned fills = 0;
  struct thin_op op;
  struct plan pl;
  int r, fresh;

  if (volume_check_range (v, offset, count, true) == -1)
    return -1;
  slot_range (t, offset, count, &l0, &l1);
  plan_init (&pl);
  pthread_mutex_lock (&t->lock);
  op_begin_locked (t, &op, l0, l1, OP_IO);
  fresh = plan_write_locked (t, &op, &pl);
  pthread_mutex_unlock (&t->lock);

  r = fresh == -1 ? -1 : 0;
  /* A commit follows new slots (FUA or not, see below): their data need
   * not be written FUA.
   */
  if (fresh == 1)
    r = fill_ends (t, &pl, offset, end, &fills);
  if (r == 0)
    r = write_plan (t, &pl, buf, offset, end, fua && fresh == 0);

  pthread_mutex_lock (&t->lock);
  if (fresh == 1)
    r = finish_write_locked (t, &pl, r);
  t->zero_fills += fills;
  need = fresh == 1 && r == 0 ? commit_needed_locked (t, fua) : COMMIT_NONE;
  op_end_locked (t, &op);
  pthread_mutex_unlock (&t->lock);
  plan_free (&pl);
  return r == 0 ? commit_as_needed (t, need) : r;
}

/* Reads: mapped runs from the engine, the rest zeros. */
struct read_args {
  char *buf;
  uint64_t offset;
};

static int
read_run (struct thin *t, uint64_t pos, uint64_t to, bool mapped, uint32_t p,
          void *arg)
{
  struct read_args *a = arg;
  char *dst = a->buf + (pos - a->offset);

  if (mapped)
    return engine_pread (t->e, dst, (uint32_t) (to - pos),
                         run_address (t, p, pos));
  memset (dst, 0, to - pos);
  return 0;
}

static int
thin_pread (struct volume *v, void *buf, uint32_t count, uint64_t offset)
{
  struct thin *t = thin_of (v);
  struct read_args a = { .buf = buf, .offset = offset };
  uint64_t l0, l1;
  struct thin_op op;
  int r;

  if (volume_check_range (v, offset, count, false) == -1)
    return -1;
  slot_range (t, offset, count, &l0, &l1);
  pthread_mutex_lock (&t->lock);
  op_begin_locked (t, &op, l0, l1, OP_IO);
  pthread_mutex_unlock (&t->lock);
  r = for_each_run (t, offset, count, read_run, &a);
  pthread_mutex_lock (&t->lock);
  op_end_locked (t, &op);
  pthread_mutex_unlock (&t->lock);
  return r;
}

/* Trims and zeros. */

struct clear_args {
  bool zero;                        /* zero, else trim */
  bool may_trim, fua, fast;
};

/* A TRIM, or a zero that may trim, unmaps whole slots. */
static bool
unmaps (const struct clear_args *a)
{
  return !a->zero || a->may_trim;
}

/* The unmaps of a batch have their discard in the engine: the runs can
 * be freed by the commit that makes their records durable.
 */
static void
mark_recorded_locked (struct thin *t, uint64_t first_seq, uint64_t last_seq)
{
  size_t lo = 0, hi = t->nundurable;

  while (lo < hi) {                 /* the first entry >= first_seq */
    size_t mid = lo + (hi - lo) / 2;

    if (t->undurable[mid].seq < first_seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < t->nundurable && t->undurable[lo].seq <= last_seq; lo++)
    t->undurable[lo].recorded = true;
  pthread_cond_broadcast (&t->changed);
}

struct unmapped {
  uint32_t p, n;
};

/* Unmap up to UNMAP_BATCH mapped runs of [*pos, l1), journaling each
 * (one hold of the lock: their records are numbered from *first_seq
 * on, one after another); fills batch and returns how many, or -1
 * (ENOMEM; nothing more).
 */
static int
unmap_batch_locked (struct thin *t, uint64_t *pos, uint64_t l1,
                    struct unmapped *batch, uint64_t *first_seq)
{
  int k = 0;

  while (*pos < l1 && k < UNMAP_BATCH) {
    uint64_t n, seq;
    uint32_t p;

    if (!thin_map_lookup (&t->map, *pos, l1 - *pos, &p, &n)) {
      *pos += n;
      continue;
    }
    if (thin_reserve_records_locked (t, 1) == -1 ||
        thin_map_remove (&t->map, *pos, n) == -1)
      return k > 0 ? k : -1;
    seq = thin_append_record_locked (t, THIN_REC_UNMAP, *pos, n, p);
    if (k == 0)
      *first_seq = seq;
    t->undurable[t->nundurable++] = (struct thin_undurable) {
      .seq = seq, .p = p, .n = (uint32_t) n,
    };
    t->undurable_slots += n;
    batch[k++] = (struct unmapped) { p, (uint32_t) n };
    *pos += n;
  }
  return k;
}

/* Unmap the whole slots [l0, l1) and hand their physical runs to the
 * engine as discards.
 */
static int
unmap_range (struct thin *t, uint64_t l0, uint64_t l1, bool fua)
{
  struct unmapped batch[UNMAP_BATCH];
  uint64_t pos = l0;
  int r = 0;

  while (pos < l1) {
    uint64_t first_seq = 0;
    int k;

    pthread_mutex_lock (&t->lock);
    k = unmap_batch_locked (t, &pos, l1, batch, &first_seq);
    pthread_mutex_unlock (&t->lock);
    if (k <= 0)
      return k;
    for (int i = 0; i < k; i++)
      if (engine_trim (t->e, phys_offset (t, batch[i].p),
                       (uint64_t) batch[i].n << t->shift, fua) == -1)
        r = -1;
    pthread_mutex_lock (&t->lock);
    mark_recorded_locked (t, first_seq, first_seq + k - 1);
    pthread_mutex_unlock (&t->lock);
    if (r == -1)
      return -1;
  }
  return 0;
}

/* What a trim or zero does to mapped slots that stay mapped: a trim or
 * zero at the physical address (unmapped ones read as zeros already).
 */
static int
clear_run (struct thin *t, uint64_t pos, uint64_t to, bool mapped, uint32_t p,
           void *arg)
{
  const struct clear_args *a = arg;

  if (!mapped)
    return 0;
  return a->zero ? engine_zero (t->e, run_address (t, p, pos), to - pos,
                                a->may_trim, a->fua, a->fast)
                 : engine_trim (t->e, run_address (t, p, pos), to - pos,
                                a->fua);
}

static int
clear_mapped (struct thin *t, uint64_t offset, uint64_t length,
              const struct clear_args *a)
{
  return for_each_run (t, offset, length, clear_run, (void *) a);
}

/* A whole slot is unmapped by a TRIM or a zero that may trim; the rest
 * (parts of slots, and every slot of a zero that must not trim) stays
 * mapped and goes to the engine at the physical address.  The last slot
 * of a disk whose size is not a multiple of the slot is whole when it
 * is covered to the end of the disk.
 */
static int
clear (struct thin *t, uint64_t offset, uint64_t length,
       const struct clear_args *a)
{
  uint64_t end = offset + length, l0, l1, w0, w1;
  struct thin_op op;
  int r = 0;

  if (volume_check_range (&t->v, offset, length, true) == -1)
    return -1;
  slot_range (t, offset, length, &l0, &l1);
  w0 = round_up (offset, t->slot) >> t->shift;
  w1 = end == t->v.size ? l1 : end >> t->shift;
  if (!unmaps (a) || w1 <= w0)
    w0 = w1 = l1;                   /* nothing to unmap */
  pthread_mutex_lock (&t->lock);
  op_begin_locked (t, &op, l0, l1, w1 > w0 ? OP_UNMAP : OP_IO);
  pthread_mutex_unlock (&t->lock);

  if (w1 > w0) {
    uint64_t head_end = w0 << t->shift, tail = w1 << t->shift;

    if (offset < head_end)
      r = clear_mapped (t, offset, head_end - offset, a);
    if (r == 0)
      r = unmap_range (t, w0, w1, a->fua);
    if (r == 0 && tail < end)
      r = clear_mapped (t, tail, end - tail, a);
  }
  else
    r = clear_mapped (t, offset, length, a);

  pthread_mutex_lock (&t->lock);
  op_end_locked (t, &op);
  pthread_mutex_unlock (&t->lock);
  if (r == 0)
    r = commit_if_needed (t, a->fua);
  return r;
}

static int
thin_zero (struct volume *v, uint64_t offset, uint64_t length, bool may_trim,
           bool fua, bool fast)
{
  struct thin *t = thin_of (v);
  struct clear_args a = {
    .zero = true, .may_trim = may_trim, .fua = fua, .fast = fast,
  };

  /* A fast zero must change nothing when it fails: refuse before
   * unmapping anything if mapped slots would need slow zeroing.
   */
  if (fast && !engine_limits (t->e)->can_zero &&
      (!may_trim || !is_aligned (offset, t->slot) ||
       !is_aligned (length, t->slot))) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return clear (t, offset, length, &a);
}

static int
thin_trim (struct volume *v, uint64_t offset, uint64_t length, bool fua)
{
  struct thin *t = thin_of (v);
  struct clear_args a = { .zero = false, .fua = fua };

  pthread_mutex_lock (&t->lock);
  t->trims++;
  t->trim_bytes += length;
  pthread_mutex_unlock (&t->lock);
  return clear (t, offset, length, &a);
}

static int
thin_flush (struct volume *v)
{
  return thin_commit (thin_of (v), true);
}

/* Extents: unmapped slots are holes that read as zeros, mapped ones
 * data.
 */
struct extents_args {
  backend_extent_fn fn;
  void *opaque;
};

static int
extent_run (struct thin *t, uint64_t pos, uint64_t to, bool mapped, uint32_t p,
            void *arg)
{
  struct extents_args *a = arg;

  return a->fn (pos, to - pos, mapped ? 0 : BACKEND_EXTENT_HOLE |
                BACKEND_EXTENT_ZERO, a->opaque);
}

static int
thin_extents (struct volume *v, uint64_t offset, uint64_t length,
              backend_extent_fn fn, void *opaque)
{
  struct extents_args a = { .fn = fn, .opaque = opaque };

  if (volume_check_range (v, offset, length, false) == -1)
    return -1;
  return for_each_run (thin_of (v), offset, length, extent_run, &a);
}

bool
thin_journal_full_locked (struct thin *t)
{
  uint64_t grown = MIN (thin_map_runs (&t->map) * t->journal_per_run,
                        JOURNAL_MAX);

  return t->journal_end > MAX (t->journal_limit, grown);
}

void
thin_set_journal_limit (struct volume *v, uint64_t bytes)
{
  struct thin *t = thin_of (v);

  pthread_mutex_lock (&t->commit_lock);
  t->journal_limit = bytes;
  t->journal_per_run = 0;
  pthread_mutex_unlock (&t->commit_lock);
}

/* Statistics. */

static void
thin_stats (struct volume *v, struct volume_stats *vst)
{
  struct thin *t = thin_of (v);
  struct thin_stats *st = &vst->th;
  struct thin_space_stats sp;

  pthread_mutex_lock (&t->lock);
  reap_locked (t, REAP_ON_STATS);
  thin_space_get_stats (&t->space, &sp);
  vst->thin = true;
  st->slot = t->slot;
  st->size = t->v.size;
  st->slots = t->map.nphys;
  st->trims = t->trims;
  st->trim_bytes = t->trim_bytes;
  st->mapped = t->map.mapped;
  st->mapped_runs = thin_map_runs (&t->map);
  st->free_undurable = t->undurable_slots;
  st->free_pending = sp.pending;
  st->free_pending_runs = sp.pending_runs;
  st->free_pending_largest = sp.pending_largest;
  st->free_clean = sp.clean;
  st->free_clean_runs = sp.clean_runs;
  st->free_zero = sp.zero;
  st->map_bytes = thin_map_memory (&t->map);
  st->memory_bytes = st->map_bytes + sp.memory + t->bufcap;
  st->allocated = t->allocated;
  st->reused = t->reused;
  st->enospc = t->enospc;
  st->zero_fills = t->zero_fills;
  st->commits = t->commits;
  st->journal_bytes = t->meta_bytes;
  st->checkpoints = t->checkpoints;
  st->last_checkpoint = t->last_checkpoint;
  pthread_mutex_unlock (&t->lock);
}

static ssize_t
thin_dump_map_batch (struct volume *v, uint64_t from,
                     struct volume_map_run *runs, size_t max)
{
  struct thin *t = thin_of (v);
  struct extent x;
  size_t n = 0;

  pthread_mutex_lock (&t->lock);
  for (; n < max && extmap_find_from (t->map.runs, from, &x); n++) {
    uint64_t l = MAX (from, x.offset);

    /* A run's physical start is kept in the extent's time field. */
    runs[n] = (struct volume_map_run) {
      .logical = l, .physical = x.time + (l - x.offset),
      .length = x.offset + x.length - l,
    };
    from = x.offset + x.length;
  }
  pthread_mutex_unlock (&t->lock);
  return n;
}

/* Opening. */

/* slot=auto: the slot size of an existing meta file (both format
 * versions hold it at offset 16), else the discard granularity, at
 * least 4 KiB: the block of the common filesystems, so that they free
 * whole slots, where a larger slot leaves parts of slots pending that
 * no reuse can cancel (docs/design-notes.md, "Thin mode").
 */
static uint64_t
auto_slot (struct engine *e, const char *meta)
{
  unsigned char h[24];
  uint64_t slot = 0;
  int fd = open (meta, O_RDONLY | O_CLOEXEC);

  if (fd >= 0) {
    if (pread (fd, h, sizeof h, 0) == (ssize_t) sizeof h &&
        memcmp (h, "DCTHIN\0\0", 8) == 0)
      slot = get64 (h + 16);
    close (fd);
  }
  if (is_power_of_2 (slot) && slot >= 512 && slot <= (UINT64_C (1) << 30))
    return slot;
  return MAX (UINT64_C (4096), engine_granularity (e));
}

/* The slot against the backend, and the pool's size. */
static int
check_geometry (struct engine *e, struct thin *t)
{
  uint64_t bsize = engine_size (e);

  if (t->slot < engine_granularity (e)) {
    dc_error ("slot=%" PRIu64 ": must be at least the discard granularity, "
              "%" PRIu64 " bytes (a smaller slot could never be discarded)",
              t->slot, engine_granularity (e));
    return -1;
  }
  if (bsize / t->slot == 0 || bsize / t->slot > THIN_MAX_PHYS) {
    dc_error ("slot=%" PRIu64 ": the backend's %" PRIu64 " bytes must hold "
              "from 1 to %" PRIu32 " slots", t->slot, bsize, THIN_MAX_PHYS);
    return -1;
  }
  return 0;
}

static const struct volume_ops thin_ops;

static struct thin *
thin_new (struct engine *e, const struct volume_config *cfg)
{
  struct thin *t = calloc (1, sizeof *t);
  pthread_condattr_t attr;

  if (t == NULL || (t->path = strdup (cfg->meta)) == NULL) {
    free (t);
    dc_error ("thin: out of memory");
    return NULL;
  }
  t->v.ops = &thin_ops;
  t->v.engine = t->e = e;
  t->v.size = cfg->size ? cfg->size : engine_size (e);
  t->v.limits = *engine_limits (e);
  t->v.limits.can_extents = true;
  t->fd = -1;
  t->slot = cfg->slot ? cfg->slot : auto_slot (e, cfg->meta);
  t->shift = __builtin_ctzll (t->slot);
  t->read_only = t->v.limits.read_only;
  t->journal_limit = JOURNAL_LIMIT;
  t->journal_per_run = JOURNAL_PER_RUN;
  for (unsigned i = 0; i < THIN_ACTIVE_TAILS; i++)
    t->tails[i] = THIN_MAX_PHYS;
  t->id.slot = t->slot;
  t->id.size = t->v.size;
  t->id.backend_size = engine_size (e);
  t->id.backend = *engine_identity (e);
  pthread_mutex_init (&t->lock, NULL);
  pthread_mutex_init (&t->commit_lock, NULL);
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&t->changed, &attr);
  pthread_condattr_destroy (&attr);
  return t;
}

static void
thin_free (struct thin *t)
{
  thin_map_free (&t->map);
  thin_space_free (&t->space);
  if (t->fd >= 0)
    close (t->fd);
  pthread_cond_destroy (&t->changed);
  pthread_mutex_destroy (&t->commit_lock);
  pthread_mutex_destroy (&t->lock);
  free (t->undurable);
  free (t->buf);
  free (t->path);
  free (t);
}

static void
thin_close (struct volume *v)
{
  struct thin *t = thin_of (v);

  thin_meta_close (t);
  thin_free (t);
}

static const struct volume_ops thin_ops = {
  .name = "thin",
  .pread = thin_pread,
  .pwrite = thin_pwrite,
  .zero = thin_zero,
  .trim = thin_trim,
  .flush = thin_flush,
  .extents = thin_extents,
  .stats = thin_stats,
  .dump_map_batch = thin_dump_map_batch,
  .close = thin_close,
};

struct volume *
thin_volume_open (struct engine *e, const struct volume_config *cfg)
{
  struct thin *t;

  if (cfg->meta == NULL) {
    dc_error ("thin=on needs meta=FILE");
    errno = EINVAL;
    return NULL;
  }
  if ((t = thin_new (e, cfg)) == NULL)
    return NULL;
  if (check_geometry (e, t) == -1) {
    thin_free (t);
    errno = EINVAL;
    return NULL;
  }
  if (thin_map_init (&t->map, (t->v.size + t->slot - 1) >> t->shift,
                     engine_size (e) >> t->shift) == -1 ||
      thin_space_init (&t->space) == -1 || thin_meta_open (t) == -1) {
    int saved_errno = errno;

    thin_free (t);
    errno = saved_errno;
    return NULL;
  }
  return &t->v;
}
