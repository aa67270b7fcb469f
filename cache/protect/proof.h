/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: proof of effect.  A discard a store acknowledges may
 * free nothing (librbd skips partial objects, the kernel rbd driver
 * drops discards under 64 KiB, arrays ignore unaligned UNMAPs, a file
 * system without hole punching keeps its blocks).  After forwarding,
 * a share of the discards (proof=, counted per command) is queued here,
 * clipped to proof-bytes; the flusher thread later asks the backend how
 * much of each is still allocated (backend_range_allocated), never on
 * a client's request path.  A sample counts only if the known-clean map
 * still covers it when the answer is in, so a write that raced with the
 * check cannot make a discard look ineffective.
 *
 * This file keeps the queue and the counters; the engine's side (the
 * check itself, the log line, proof-adapt) is engine_proof_turn_drops_lock.
 * Not thread-safe: the engine's lock guards it.
 */
#ifndef DISCARDCACHE_PROOF_H
#define DISCARDCACHE_PROOF_H

#include <stdbool.h>
#include <stdint.h>

/* Samples waiting for a check; more are skipped (counted). */
#define PROOF_QUEUE 16

/* proof-adapt= never raises the forwarding granularity past this: the
 * largest allocation unit met in practice (RBD's default object size).
 */
#define PROOF_ADAPT_MAX (UINT64_C (4) << 20)

struct proof_sample {
  uint64_t offset, length;
  uint64_t granularity;        /* the forwarding granularity it was sent at */
};

struct proof {
  uint64_t ppm;                /* share of discards sampled, per million */
  uint64_t max_bytes;          /* at most this much of one is checked */
  bool supported;              /* the backend can tell (extents) */
  uint64_t credit;             /* += ppm per discard; a sample at 10^6 */
  struct proof_sample q[PROOF_QUEUE];
  unsigned head, n;
  bool ineffective_said;       /* the first ineffective result is logged */
  bool adapt_max_said;         /* proof-adapt reached PROOF_ADAPT_MAX */
  /* Counters for the statistics. */
  uint64_t checks;             /* samples checked */
  uint64_t checked_bytes;
  uint64_t ineffective_bytes;  /* still allocated after the discard */
  uint64_t skipped;            /* written since, forgotten, queue full, error */
  uint64_t adapted;            /* times proof-adapt raised the granularity */
};

/* ppm 0 (or a backend that cannot tell: supported false) turns it off. */
extern void proof_init (struct proof *p, uint64_t ppm, uint64_t max_bytes,
                        bool supported)
  __attribute__ ((nonnull (1)));

/* Whether checks are on at all. */
extern bool proof_enabled (const struct proof *p)
  __attribute__ ((nonnull (1)));

/* One discard command of [offset, offset+length), aligned to
 * granularity, succeeded: maybe queue (the head of) it for a check.
 */
extern void proof_offer (struct proof *p, uint64_t offset, uint64_t length,
                         uint64_t granularity)
  __attribute__ ((nonnull (1)));

/* Take the oldest queued sample.  False if there is none. */
extern bool proof_take (struct proof *p, struct proof_sample *s)
  __attribute__ ((nonnull (1, 2)));

/* Whether a sample waits. */
extern bool proof_queued (const struct proof *p)
  __attribute__ ((nonnull (1)));

#endif /* DISCARDCACHE_PROOF_H */
