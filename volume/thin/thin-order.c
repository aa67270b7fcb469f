/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume's request ordering (see thin-order.h):
 * the list of requests in flight and who waits for whom.
 */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "thin-internal.h"
#include "thin-order.h"

static bool
conflicts (const struct thin_op *a, const struct thin_op *b)
{
  return a->l0 < b->l1 && b->l0 < a->l1 &&
         (a->kind != OP_IO || b->kind != OP_IO);
}

/* Wait until no older op conflicts with op.  Returns whether it had to
 * (the lock was dropped meanwhile).
 */
bool
thin_op_wait_drops_lock (struct thin *t, const struct thin_op *op)
{
  bool waited = false;

  for (;;) {
    const struct thin_op *o;

    for (o = t->ops; o != NULL; o = o->next)
      if (o->ticket < op->ticket && conflicts (o, op))
        break;
    if (o == NULL)
      return waited;
    thin_cond_wait_drops_lock (t);
    waited = true;
  }
}

void
thin_op_begin_drops_lock (struct thin *t, struct thin_op *op, uint64_t l0, uint64_t l1,
                 enum op_kind kind)
{
  *op = (struct thin_op) {
    .next = t->ops, .ticket = t->next_ticket++, .l0 = l0, .l1 = l1,
    .kind = kind,
  };
  t->ops = op;
  thin_op_wait_drops_lock (t, op);
}

void
thin_op_end_locked (struct thin *t, struct thin_op *op)
{
  struct thin_op **pp;

  for (pp = &t->ops; *pp != op; pp = &(*pp)->next)
    ;
  *pp = op->next;
  pthread_cond_broadcast (&t->changed);
}

unsigned
thin_read_begin_locked (struct thin *t)
  REQUIRES (thin_lock)
{
  unsigned parity = t->read_epoch & 1;

  /* Relaxed: the lock orders it before a commit's turn of the epoch. */
  atomic_fetch_add_explicit (&t->readers[parity], 1, memory_order_relaxed);
  return parity;
}

void
thin_read_end (struct thin *t, unsigned parity)
{
  atomic_fetch_sub_explicit (&t->readers[parity], 1, memory_order_release);
}

unsigned
thin_read_epoch_turn_locked (struct thin *t)
  REQUIRES (thin_lock)
{
  return t->read_epoch++ & 1;
}

/* Reads take microseconds to milliseconds: poll. */
void
thin_reads_wait (struct thin *t, unsigned parity)
  EXCLUDES (thin_lock)
{
  const struct timespec pause = { .tv_nsec = 20000 };

  while (atomic_load_explicit (&t->readers[parity], memory_order_acquire) > 0)
    nanosleep (&pause, NULL);
}
