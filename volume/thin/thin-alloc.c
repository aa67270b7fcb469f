/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume's allocation (see thin-internal.h): a
 * request's plan (its mapped runs, and free slots chosen for its gaps)
 * and the policy that chooses them: continue a stream, reuse slots whose
 * discard is still pending, keep active streams' next slots free.  The
 * free space itself is thin-space.c; here, under the thin lock, it is
 * checked against what the engine still holds.  Design:
 * docs/design-notes.md, "Thin mode".
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "engine.h"
#include "grow.h"
#include "log.h"
#include "thin-internal.h"
#include "thin-order.h"
#include "verify.h"

/* Best-fit picks whose discard turned out to be gone that one
 * allocation moves to clean space before it takes clean space itself.
 */
#define VERIFY_MAX 32

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

/* Plans. */

void
thin_plan_init (struct plan *pl)
{
  pl->seg = pl->inline_seg;
  pl->n = 0;
  pl->cap = sizeof pl->inline_seg / sizeof pl->inline_seg[0];
  pl->head_zero = pl->tail_zero = false;
  pl->from_reserve = false;
}

void
thin_plan_free (struct plan *pl)
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
pending_to_clean_locked (struct thin *t, const struct extent *x)
  REQUIRES (thin_lock)
{
  bool zero = thin_reads_as_zeros_locked (t, x->offset, x->length);

  if (thin_space_take (&t->space, x->offset, x->length) == 0)
    thin_space_add_clean (&t->space, x->offset, x->length, zero);
}

/* Check the pending runs freed longest ago, at most max of them. */
void
thin_reap_locked (struct thin *t, unsigned max)
{
  struct extent x;

  DEBUG_VERIFY_HELD (&t->lock);

  while (max-- > 0 && thin_space_oldest_pending (&t->space, &x) &&
         !discard_pending (t, x.offset, x.length))
    pending_to_clean_locked (t, &x);
}

/* The physical slot that continues logical slot l-1, if l-1 is mapped
 * or being set up by another request: THIN_MAX_PHYS if none.
 */
static uint64_t
goal_after_locked (struct thin *t, uint64_t l)
  REQUIRES (thin_lock)
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
is_tail_locked (const struct thin *t, uint64_t p)
  REQUIRES (thin_lock)
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
note_tail_locked (struct thin *t, uint64_t from, uint64_t tail)
  REQUIRES (thin_lock)
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
run_at_goal_locked (struct thin *t, uint64_t goal, struct extent *x)
  REQUIRES (thin_lock)
{
  enum thin_free_kind kind;

  if (goal >= t->map.nphys)
    return THIN_NOT_FREE;
  kind = thin_space_find (&t->space, goal, x);
  return kind != THIN_NOT_FREE && x->offset == goal ? kind : THIN_NOT_FREE;
}

/* Choose up to want free slots for a run of logical slots whose
 * predecessor sits at physical goal (THIN_MAX_PHYS: none):
 *   1. the slots right after goal if they are in the reserve or
 *      pending: a logically contiguous stream stays physically
 *      contiguous, and sends or cancels no discard;
 *   2. other slots of the reserve, then other pending slots, best fit
 *      by run length (a whole run or an end of one, never its middle;
 *      the most recently freed among equals): a write into the reserve
 *      sends nothing and leaves room in it for the next run freed, one
 *      into pending slots cancels their discard;
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
  REQUIRES (thin_lock)
{
  enum thin_free_kind at_goal;
  uint64_t at, from_goal;
  struct extent x, g;

  /* (Settling pending runs below can only make a clean run at goal
   * longer: g stays true.)
   */
  at_goal = run_at_goal_locked (t, goal, &g);
  if (at_goal == THIN_PENDING || at_goal == THIN_RESERVE) {
    *c = (struct choice) {
      .p = (uint32_t) goal, .k = MIN (want, g.length), .kind = at_goal,
      .run = g,
    };
    c->pending = at_goal == THIN_PENDING && discard_pending (t, goal, c->k);
    note_tail_locked (t, goal, goal + c->k);
    return;
  }
  c->pending = false;
  c->kind = thin_space_best_reserve (&t->space, want, &x) ? THIN_RESERVE
                                                          : THIN_NOT_FREE;
  for (unsigned i = 0; c->kind == THIN_NOT_FREE && i < VERIFY_MAX &&
         thin_space_best_pending (&t->space, want, &x); i++) {
    if (discard_pending (t, x.offset, x.length)) {
      c->pending = true;
      c->kind = THIN_PENDING;
      break;
    }
    pending_to_clean_locked (t, &x);
  }
  if (c->kind != THIN_NOT_FREE) {
    c->k = MIN (want, x.length);
    at = x.length > c->k && is_tail_locked (t, x.offset)
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
    /* The caller counted the free slots. */
    VERIFY3U (c->kind, !=, THIN_NOT_FREE);
    at = x.length > 1 && is_tail_locked (t, x.offset)
         ? x.offset + x.length / 2 : x.offset;
    c->k = MIN (want, x.offset + x.length - at);
    from_goal = THIN_MAX_PHYS;
  }
  c->p = (uint32_t) at;
  c->run = x;
  note_tail_locked (t, from_goal, at + c->k);
}

/* What a choice hands out: 1 to want slots of the store, all inside the
 * free run they are taken from (slots outside it may be mapped: a
 * second owner of a slot reads the other's data).
 */
static void
verify_choice (const struct thin *t, const struct choice *c, uint64_t want)
  REQUIRES (thin_lock)
{
  VERIFY3U (c->k, >=, 1);
  VERIFY3U (c->k, <=, want);
  VERIFY3U ((uint64_t) c->p + c->k, <=, t->map.nphys);
  VERIFY3U (c->p, >=, c->run.offset);
  VERIFY3U ((uint64_t) c->p + c->k, <=, c->run.offset + c->run.length);
}


/* Give the fresh slots of a plan back (the write failed): they may hold
 * anything, so they are clean but not zero.
 */
void
thin_unreserve_locked (struct thin *t, const struct plan *pl)
{
  DEBUG_VERIFY_HELD (&t->lock);
  for (size_t i = 0; i < pl->n; i++)
    if (pl->seg[i].fresh) {
      VERIFY3U (pl->seg[i].p + pl->seg[i].n, <=, t->map.nphys);
      thin_space_add_clean (&t->space, pl->seg[i].p, pl->seg[i].n, false);
    }
}

/* Allocate the gap [l, l+n) of a plan, run by run.  Never fails for want
 * of slots (counted before); -1 only for want of memory, with the slots
 * taken so far left in the plan.
 */
static int
allocate_gap_locked (struct thin *t, struct plan *pl, uint64_t l, uint64_t n,
                     uint64_t l0, uint64_t l1)
  REQUIRES (thin_lock)
{
  const struct segment *prev = pl->n ? &pl->seg[pl->n - 1] : NULL;
  uint64_t goal = prev && prev->l + prev->n == l
                  ? (uint64_t) prev->p + prev->n : goal_after_locked (t, l);

  /* The gap lies inside the request being planned. */
  VERIFY3U (l, >=, l0);
  VERIFY3U (l + n, <=, l1);
  while (n > 0) {
    struct choice c;

    choose_locked (t, goal, n, &c);
    verify_choice (t, &c, n);
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
    if (c.kind == THIN_RESERVE) {
      t->avoided++;
      t->avoided_slots += c.k;
      pl->from_reserve = true;
    }
    goal = (uint64_t) c.p + c.k;
    l += c.k;
    n -= c.k;
  }
  return 0;
}

/* Plan [l0, l1): its mapped runs and, with alloc, new slots for its
 * gaps (else a gap is not planned).  The free slots were counted.
 */
int
thin_plan_locked (struct thin *t, struct plan *pl, uint64_t l0, uint64_t l1,
             bool alloc)
{
  uint64_t n;
  uint32_t p;

  DEBUG_VERIFY_HELD (&t->lock);
  VERIFY3U (l1, <=, t->map.nlogical);
  if (alloc)
    thin_reap_locked (t, REAP_ON_ALLOC);
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

/* Plan op's write again, allocating its gaps (need slots in all).  The
 * lock was held since the pass that counted them, so the map is as it
 * found it: a write wholly into a gap (any write into fresh space of at
 * most a slot) skips a second lookup, which in a map of many runs costs
 * as much as the allocation.
 */
int
thin_plan_alloc_locked (struct thin *t, struct plan *pl, const struct thin_op *op,
                   uint64_t need)
{
  pl->n = 0;
  if (need < op->l1 - op->l0)
    return thin_plan_locked (t, pl, op->l0, op->l1, true);
  thin_reap_locked (t, REAP_ON_ALLOC);
  return allocate_gap_locked (t, pl, op->l0, need, op->l0, op->l1);
}
