/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume's data path (see thin-volume.h; the
 * map, the free space and the format are in thin-pure.h, the meta file
 * on disk in thin-meta.c; request ordering in thin-order.c, allocation in
 * thin-alloc.c, opening and statistics in thin-open.c).  Design:
 * docs/design-notes.md, "Thin mode".
 *
 * Each request is planned under the thin lock as segments: runs of
 * logical slots on consecutive physical slots, mapped or newly
 * allocated; the I/O then goes to the engine (engine.h's data path) at
 * physical addresses, one call per physical run, so pending-discard
 * cancellation, alignment, batching and the rate limit all apply as in
 * identity mode.  The lock is never held across I/O; the order is thin,
 * then engine.  Each request first takes its logical slots in the
 * range lock of thin-order.h.
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
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "arith.h"
#include "clock.h"
#include "engine.h"
#include "log.h"
#include "thin-internal.h"
#include "thin-order.h"

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
/* Mapped runs a large unmap takes per hold of the lock. */
#define UNMAP_BATCH 256

/* The logical slots of [offset, offset+length). */
static void
slot_range (const struct thin *t, uint64_t offset, uint64_t length,
            uint64_t *l0, uint64_t *l1)
{
  *l0 = offset >> t->shift;
  *l1 = ((offset + length - 1) >> t->shift) + 1;
}

/* A run of a request: bytes [pos, to) on mapped slots from physical
 * slot p on (mapped), or on unmapped ones.
 */
struct run {
  uint64_t pos, to;
  bool mapped;
  uint32_t p;
};

/* The run that starts at byte pos of [.., end).  Lock held. */
static void
lookup_run_locked (struct thin *t, uint64_t pos, uint64_t end,
                   struct run *r)
  REQUIRES (thin_lock)
{
  uint64_t l = pos >> t->shift, l1 = ((end - 1) >> t->shift) + 1, n;

  r->p = 0;
  r->mapped = thin_map_lookup (&t->map, l, l1 - l, &r->p, &n);
  r->pos = pos;
  r->to = MIN (end, (l + n) << t->shift);
}

/* Call fn for each run of [offset, offset+length), looked up under the
 * lock, called without it, until fn fails; first, if not NULL, is the
 * first run, looked up already (in the hold that began the op: a read
 * within one run takes the lock twice, not three times).  The caller's
 * op keeps the runs from being unmapped meanwhile.
 */
typedef int (*run_fn) (struct thin *t, uint64_t pos, uint64_t to,
                       bool mapped, uint32_t p, void *arg);

static int
for_each_run (struct thin *t, uint64_t offset, uint64_t length, run_fn fn,
              void *arg, const struct run *first)
{
  uint64_t end = offset + length;

  for (uint64_t pos = offset; pos < end; ) {
    struct run r;

    if (first && pos == offset)
      r = *first;
    else {
      thin_lock_acquire (t);
      lookup_run_locked (t, pos, end, &r);
      thin_lock_release (t);
    }
    if (fn (t, pos, r.to, r.mapped, r.p, arg) == -1)
      return -1;
    pos = r.to;
  }
  return 0;
}

/* The physical address of byte pos of a run starting at slot p. */
static uint64_t
run_address (const struct thin *t, uint32_t p, uint64_t pos)
{
  return phys_offset (t, p) + (pos & (t->slot - 1));
}

/* Writes. */

/* Wait a little for the unmaps whose discard is being handed to the
 * engine: a commit frees them once that is done.
 */
static void
wait_unrecorded_drops_lock (struct thin *t)
  REQUIRES (thin_lock)
{
  struct timespec ts = deadline_after_ns (10000000);

  thin_cond_timedwait_drops_lock (t, &ts);
}

static int
enospc_locked (struct thin *t)
  REQUIRES (thin_lock)
{
  if (t->enospc++ == 0)
    dc_error ("thin: no free slot left in the pool of %" PRIu64 " (%" PRIu64
              " bytes): writes needing new slots fail with ENOSPC until "
              "something is trimmed (counted as thin_enospc)",
              t->map.nphys, t->map.nphys << t->shift);
  errno = ENOSPC;
  return -1;
}

/* Plan a write over [l0, l1), reserving every slot it needs first.
 * Returns 1 with the plan (op is OP_SETUP if it allocated), 0 if no
 * slot is needed, or -1 (ENOSPC having changed nothing, or the commit's
 * error).  Lock held; dropped during a commit.
 */
static int
plan_write_drops_lock (struct thin *t, struct thin_op *op, struct plan *pl)
  REQUIRES (thin_lock)
{
  for (;;) {
    uint64_t need = op->l1 - op->l0;
    bool recorded = true;
    int r;

    /* The mapped runs first: a write into mapped slots needs no more. */
    pl->n = 0;
    if (thin_plan_locked (t, pl, op->l0, op->l1, false) == -1)
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
      if (thin_op_wait_drops_lock (t, op))
        continue;
    }
    if (need <= thin_space_slots (&t->space)) {
      op->plan = pl;
      if (thin_plan_alloc_locked (t, pl, op, need) == -1) {
        thin_unreserve_locked (t, pl);
        return -1;
      }
      return 1;
    }
    if (need > thin_space_slots (&t->space) + t->undurable_slots)
      return enospc_locked (t);
    /* Unmaps a commit can make free. */
    for (size_t i = 0; i < t->nundurable; i++)
      recorded &= t->undurable[i].recorded;
    thin_lock_release (t);
    r = thin_commit (t, false);
    thin_lock_acquire (t);
    if (r == -1)
      return -1;
    if (!recorded)
      wait_unrecorded_drops_lock (t);
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
  REQUIRES (thin_lock)
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
  t->reserve_writes += r == 0 && pl->from_reserve;
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
  REQUIRES (thin_lock)
{
  uint64_t limit = MAX (BUFFER_LIMIT,
                        MIN (thin_map_runs (&t->map) * THIN_RECORD_SIZE,
                             BUFFER_MAX));

  if ((fua && t->durable_seq + 1 < t->next_seq) ||
      t->buflen + t->takenlen >= MAX (BUFFER_WAIT_MIN, 2 * limit))
    return COMMIT_NOW;
  return t->buflen >= limit ? COMMIT_UNLESS_BUSY : COMMIT_NONE;
}

/* Run the commit that need, decided under the lock, asks for. */
static int
commit_decided (struct thin *t, enum commit_need need)
{
  switch (need) {
  case COMMIT_NOW: return thin_commit (t, false);
  case COMMIT_UNLESS_BUSY: return thin_commit_unless_busy (t);
  case COMMIT_NONE: break;
  }
  return 0;
}

/* Decide which commit a request needs, then run it. */
static int
decide_and_commit (struct thin *t, bool fua)
{
  enum commit_need need;

  thin_lock_acquire (t);
  need = commit_needed_locked (t, fua);
  thin_lock_release (t);
  return commit_decided (t, need);
}

int
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
  thin_plan_init (&pl);
  thin_lock_acquire (t);
  thin_op_begin_drops_lock (t, &op, l0, l1, OP_IO);
  fresh = plan_write_drops_lock (t, &op, &pl);
  thin_lock_release (t);

  r = fresh == -1 ? -1 : 0;
  /* A commit follows new slots (FUA or not, see below): their data need
   * not be written FUA.
   */
  if (fresh == 1)
    r = fill_ends (t, &pl, offset, end, &fills);
  if (r == 0)
    r = write_plan (t, &pl, buf, offset, end, fua && fresh == 0);

  thin_lock_acquire (t);
  if (fresh == 1)
    r = finish_write_locked (t, &pl, r);
  t->zero_fills += fills;
  need = fresh == 1 && r == 0 ? commit_needed_locked (t, fua) : COMMIT_NONE;
  thin_op_end_locked (t, &op);
  thin_lock_release (t);
  thin_plan_free (&pl);
  return r == 0 ? commit_decided (t, need) : r;
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

int
thin_pread (struct volume *v, void *buf, uint32_t count, uint64_t offset)
{
  struct thin *t = thin_of (v);
  struct read_args a = { .buf = buf, .offset = offset };
  struct run first;
  unsigned parity;
  int r;

  if (volume_check_range (v, offset, count, false) == -1)
    return -1;
  /* One hold of the lock: no unmapped slot is freed while the read
   * counts itself (thin-order.h).
   */
  thin_lock_acquire (t);
  parity = thin_read_begin_locked (t);
  lookup_run_locked (t, offset, offset + count, &first);
  thin_lock_release (t);
  r = for_each_run (t, offset, count, read_run, &a, &first);
  thin_read_end (t, parity);
  return r;
}

/* Trims and zeros. */

struct trim_zero_args {
  bool zero;                        /* zero, else trim */
  bool may_trim, fua, fast;
};

/* A TRIM, or a zero that may trim, unmaps whole slots. */
static bool
unmaps (const struct trim_zero_args *a)
{
  return !a->zero || a->may_trim;
}

struct unmapped {
  uint32_t p, n;
};

/* Unmap up to UNMAP_BATCH mapped runs of [*pos, l1), journaling each
 * (one hold of the lock: their records are numbered from *first_seq
 * on, one after another); fills batch and returns how many, or -1
 * (ENOMEM; nothing more).  *keep: the runs join the reserve, with no
 * discard (else each goes to the engine).
 */
static int
unmap_batch_locked (struct thin *t, uint64_t *pos, uint64_t l1,
                    struct unmapped *batch, uint64_t *first_seq, bool *keep)
  REQUIRES (thin_lock)
{
  uint32_t type = thin_keeps_locked (t) ? THIN_REC_KEEP : THIN_REC_UNMAP;
  int k = 0;

  *keep = type == THIN_REC_KEEP;
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
    seq = thin_append_record_locked (t, type, *pos, n, p);
    if (k == 0)
      *first_seq = seq;
    t->undurable[t->nundurable++] = (struct thin_undurable) {
      .seq = seq, .p = p, .n = (uint32_t) n, .type = type, .recorded = *keep,
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
    bool keep;
    int k;

    thin_lock_acquire (t);
    k = unmap_batch_locked (t, &pos, l1, batch, &first_seq, &keep);
    thin_lock_release (t);
    if (k <= 0)
      return k;
    if (keep)
      continue;
    for (int i = 0; i < k; i++)
      if (engine_trim (t->e, phys_offset (t, batch[i].p),
                       (uint64_t) batch[i].n << t->shift, fua) == -1)
        r = -1;
    thin_lock_acquire (t);
    thin_mark_recorded_locked (t, first_seq, first_seq + k - 1);
    thin_lock_release (t);
    if (r == -1)
      return -1;
  }
  return 0;
}

/* What a trim or zero does to mapped slots that stay mapped: a trim or
 * zero at the physical address (unmapped ones read as zeros already).
 */
static int
trim_or_zero_run (struct thin *t, uint64_t pos, uint64_t to, bool mapped,
                  uint32_t p, void *arg)
{
  const struct trim_zero_args *a = arg;

  if (!mapped)
    return 0;
  return a->zero ? engine_zero (t->e, run_address (t, p, pos), to - pos,
                                a->may_trim, a->fua, a->fast)
                 : engine_trim (t->e, run_address (t, p, pos), to - pos,
                                a->fua);
}

static int
trim_or_zero_mapped (struct thin *t, uint64_t offset, uint64_t length,
                     const struct trim_zero_args *a)
{
  return for_each_run (t, offset, length, trim_or_zero_run, (void *) a, NULL);
}

/* A whole slot is unmapped by a TRIM or a zero that may trim; the rest
 * (parts of slots, and every slot of a zero that must not trim) stays
 * mapped and goes to the engine at the physical address.  The last slot
 * of a disk whose size is not a multiple of the slot is whole when it
 * is covered to the end of the disk.
 */
static int
trim_or_zero_range (struct thin *t, uint64_t offset, uint64_t length,
                    const struct trim_zero_args *a)
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
  thin_lock_acquire (t);
  thin_op_begin_drops_lock (t, &op, l0, l1, w1 > w0 ? OP_UNMAP : OP_IO);
  thin_lock_release (t);

  if (w1 > w0) {
    uint64_t head_end = w0 << t->shift, tail = w1 << t->shift;

    if (offset < head_end)
      r = trim_or_zero_mapped (t, offset, head_end - offset, a);
    if (r == 0)
      r = unmap_range (t, w0, w1, a->fua);
    if (r == 0 && tail < end)
      r = trim_or_zero_mapped (t, tail, end - tail, a);
  }
  else
    r = trim_or_zero_mapped (t, offset, length, a);

  thin_lock_acquire (t);
  thin_op_end_locked (t, &op);
  thin_lock_release (t);
  if (r == 0)
    r = decide_and_commit (t, a->fua);
  return r;
}

int
thin_zero (struct volume *v, uint64_t offset, uint64_t length, bool may_trim,
           bool fua, bool fast)
{
  struct thin *t = thin_of (v);
  struct trim_zero_args a = {
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
  return trim_or_zero_range (t, offset, length, &a);
}

int
thin_trim (struct volume *v, uint64_t offset, uint64_t length, bool fua)
{
  struct thin *t = thin_of (v);
  struct trim_zero_args a = { .zero = false, .fua = fua };

  thin_lock_acquire (t);
  t->trims++;
  t->trim_bytes += length;
  thin_lock_release (t);
  return trim_or_zero_range (t, offset, length, &a);
}

int
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

int
thin_extents (struct volume *v, uint64_t offset, uint64_t length,
              backend_extent_fn fn, void *opaque)
{
  struct extents_args a = { .fn = fn, .opaque = opaque };

  if (volume_check_range (v, offset, length, false) == -1)
    return -1;
  return for_each_run (thin_of (v), offset, length, extent_run, &a, NULL);
}
