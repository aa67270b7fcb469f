/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume's request ordering, a range lock over
 * logical slots (like dm-thin's bio prison).
 *
 * A request in flight is a struct thin_op over its logical slots, on the
 * requester's stack, in a list as long as the requests in flight.  Each
 * op waits for the older ops it conflicts with: writes into mapped slots
 * go together; an op that allocates slots (a write into a gap) or unmaps
 * them waits for every older op over its slots and holds back every newer
 * one.  So an unmap never frees a physical slot that a request is still
 * writing, and no two writers allocate the same logical slot.  Every
 * function here runs under the thin lock (t->lock); the waits drop and
 * retake it.
 *
 * Reads are not in the list (their one hold of the lock begins them and
 * looks their first run up; nothing ends them under it): a read counts
 * itself in t->readers[] under the parity of t->read_epoch it began in.
 * An unmapped physical slot becomes free only at a commit, which turns
 * the epoch over, in the hold that takes the records, when unmapped runs
 * wait to be freed, and then waits until no read of the old parity is in
 * flight: every read that could have looked up those runs' mappings
 * began before the turn.  So no read ever sees a freed slot given to
 * another logical slot; a read concurrent with the TRIM of its slots may
 * return the old data or zeros, as NBD allows.  Commits are one at a
 * time (commit_lock), so the old parity counts no read from two turns
 * ago.
 */
#ifndef DISCARDCACHE_THIN_ORDER_H
#define DISCARDCACHE_THIN_ORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "lock.h"

struct thin;
extern struct dc_capability thin_lock;
struct plan;

/* Requests in flight. */

enum op_kind {
  OP_IO,                            /* reads and writes mapped slots */
  OP_SETUP,                         /* allocates slots */
  OP_UNMAP,                         /* unmaps slots */
};

struct thin_op {
  struct thin_op *next GUARDED_BY (thin_lock);
  uint64_t ticket;                  /* older ops have smaller ones */
  uint64_t l0, l1;                  /* logical slots */
  enum op_kind kind;
  const struct plan *plan;          /* OP_SETUP: where its slots go */
};

/* Put op over logical slots [l0, l1) into the list, the newest, and
 * wait until no older op conflicts with it.
 */
extern void thin_op_begin_drops_lock (struct thin *t, struct thin_op *op,
                                      uint64_t l0, uint64_t l1,
                                      enum op_kind kind)
  REQUIRES (thin_lock);

/* Wait until no older op conflicts with op (after its kind changed).
 * Returns whether it had to (the lock was dropped meanwhile).
 */
extern bool thin_op_wait_drops_lock (struct thin *t,
                                     const struct thin_op *op)
  REQUIRES (thin_lock);

/* Take op out of the list and wake the ops that waited for it. */
extern void thin_op_end_locked (struct thin *t, struct thin_op *op)
  REQUIRES (thin_lock);

/* Reads: begin one (lock held; returns the parity it counts under),
 * end it (no lock).
 */
extern unsigned thin_read_begin_locked (struct thin *t) REQUIRES (thin_lock);
extern void thin_read_end (struct thin *t, unsigned parity);

/* A commit about to free unmapped slots: turn the read epoch over (lock
 * held; returns the old parity), then, without the lock, wait until no
 * read of the old parity is in flight.
 */
extern unsigned thin_read_epoch_turn_locked (struct thin *t)
  REQUIRES (thin_lock);
extern void thin_reads_wait (struct thin *t, unsigned parity)
  EXCLUDES (thin_lock);

#endif /* DISCARDCACHE_THIN_ORDER_H */
