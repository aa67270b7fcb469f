/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's reuse reserve (reserve=, invariant 12).
 *
 * A run the client unmaps is honoured at once (it reads as zeros and
 * is unmapped); its physical slots are thin mode's own free space.  Up
 * to reserve= of it stays undiscarded, and the allocator takes it
 * first: a write into it sends nothing before it, where a discarded
 * run costs the device a command and then the write again.  Past the
 * reserve the largest runs go to the engine as discards (the flusher
 * sends them as any other), so the runs kept are the small scattered
 * ones that cost a command each and are the likeliest to be reused.
 * The reserve is in the meta file (KEEP and RELEASE records, and the
 * checkpoint), survives a stop and a crash, and is discarded on
 * request (discardctl flush --reserve) or under space pressure.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>

#include "engine.h"
#include "log.h"
#include "thin-internal.h"
#include "thin-volume.h"

/* Runs released per hold of the lock. */
#define RELEASE_BATCH 256

bool
thin_keeps_locked (struct thin *t)
  REQUIRES (thin_lock)
{
  return thin_reserve_limit_locked (t) > 0;
}

/* Space pressure wins (low-water=): while the engine says the backend's
 * free space is below its low water, the reserve may hold nothing, so
 * the next commit (a client's FLUSH, or the journal filling) or the
 * service's tick (thin_tick), whichever comes first, discards all of
 * it, and unmaps go to the engine at once.
 */
uint64_t
thin_reserve_limit_locked (struct thin *t)
  REQUIRES (thin_lock)
{
  return t->reserve_limit > 0 && engine_under_pressure (t->e)
         ? 0 : t->reserve_limit;
}

/* Take up to max of the largest runs out of the reserve while it holds
 * more than limit slots, each with a RELEASE record and an undurable
 * entry (freed by a commit once its discard is recorded).  Returns how
 * many, or -1 (ENOMEM, reported).
 */
static int
release_batch_locked (struct thin *t, uint64_t limit, struct thin_undurable *b,
                      int max)
  REQUIRES (thin_lock)
{
  struct extent x;
  int k = 0;

  while (k < max && thin_space_reserve_slots (&t->space) > limit &&
         thin_space_largest_reserve (&t->space, &x)) {
    uint64_t seq;

    if (thin_reserve_records_locked (t, 1) == -1 ||
        thin_space_take_from (&t->space, THIN_RESERVE, &x, x.offset,
                              x.length) == -1)
      return k > 0 ? k : -1;
    seq = thin_append_record_locked (t, THIN_REC_RELEASE, 0, x.length,
                                     (uint32_t) x.offset);
    b[k] = (struct thin_undurable) {
      .seq = seq, .p = (uint32_t) x.offset, .n = (uint32_t) x.length,
      .type = THIN_REC_RELEASE,
    };
    t->undurable[t->nundurable++] = b[k];
    t->undurable_slots += x.length;
    t->released++;
    t->released_slots += x.length;
    k++;
  }
  return k;
}

int
thin_reserve_trim (struct thin *t, uint64_t limit)
{
  struct thin_undurable batch[RELEASE_BATCH];
  int r = 0;

  for (;;) {
    int k;

    thin_lock_acquire (t);
    k = release_batch_locked (t, limit, batch, RELEASE_BATCH);
    thin_lock_release (t);
    if (k <= 0)
      return k;
    for (int i = 0; i < k; i++)
      if (engine_trim (t->e, phys_offset (t, batch[i].p),
                       (uint64_t) batch[i].n << t->shift, false) == -1)
        r = -1;
    thin_lock_acquire (t);
    thin_mark_recorded_locked (t, batch[0].seq, batch[k - 1].seq);
    thin_lock_release (t);
    if (r == -1)
      return -1;
  }
}

int
thin_release_reserve (struct volume *v)
{
  struct thin *t = thin_of (v);

  if (t->read_only)
    return 0;
  return thin_reserve_trim (t, 0);
}

int
thin_tick (struct volume *v)
{
  struct thin *t = thin_of (v);
  bool holds;

  if (t->read_only || !engine_under_pressure (t->e))
    return 0;
  thin_lock_acquire (t);
  holds = thin_space_reserve_slots (&t->space) > 0;
  thin_lock_release (t);
  return holds ? thin_reserve_trim (t, 0) : 0;
}
