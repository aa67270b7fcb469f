/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the circuit breaker (invariant 11).  It watches every
 * discard's outcome and latency and opens after breaker-errors
 * consecutive errors, or when discards have been slower than
 * breaker-latency for breaker-window.  While open, the engine holds
 * forwarding (discards stay pending; writes are never held); after a
 * backoff that doubles from breaker-backoff up to BREAKER_MAX_BACKOFF_MS
 * one probe discard goes out, and only a probe that succeeds (in time,
 * when a latency bound is set) closes it.  `discardctl resume` closes
 * it by hand.
 *
 * Pure state over a clock the caller passes in: not thread-safe (the
 * engine's lock guards it) and no I/O but the one log line per change
 * of state.
 */
#ifndef DISCARDCACHE_BREAKER_H
#define DISCARDCACHE_BREAKER_H

#include <stdbool.h>
#include <stdint.h>

/* The longest wait between two probes: 5 minutes. */
#define BREAKER_MAX_BACKOFF_MS UINT64_C (300000)

enum breaker_state {
  BREAKER_CLOSED,              /* forwarding as policy says */
  BREAKER_OPEN,                /* holding until the next probe */
  BREAKER_PROBING,             /* one probe discard in flight */
};

enum breaker_reason {
  BREAKER_REASON_NONE,
  BREAKER_REASON_ERRORS,       /* breaker-errors consecutive errors */
  BREAKER_REASON_LATENCY,      /* slower than breaker-latency for breaker-window */
};

struct breaker_config {
  uint64_t errors;             /* consecutive errors that open it; 0: never */
  uint64_t latency_ms;         /* a slower discard is slow; 0: no bound */
  uint64_t window_ms;          /* slow this long (first start to last end) opens it */
  uint64_t backoff_ms;         /* the first wait before a probe */
};

struct breaker {
  enum breaker_state state;
  enum breaker_reason reason;
  uint64_t consecutive_errors;
  uint64_t slow_since_ns;      /* start of the first of a run of slow discards */
  bool slow;                   /* such a run is going on */
  uint64_t backoff_ms;         /* the wait before the next probe */
  uint64_t next_probe_ns;      /* when it may be sent (open) */
  uint64_t opened;             /* times it opened (counter) */
  uint64_t probes;             /* probe discards sent (counter) */
};

/* A closed breaker. */
extern void breaker_init (struct breaker *b) __attribute__ ((nonnull (1)));

/* Whether the breaker holds ordinary forwarding (open or probing). */
extern bool breaker_holds (const struct breaker *b)
  __attribute__ ((nonnull (1)));

/* Whether a probe may be sent at now_ns: open and its time has come.
 * When it returns true the caller must send one discard and report it
 * with breaker_record (probe true).  *at is set to when to ask again
 * otherwise (UINT64_MAX while a probe is in flight).
 */
extern bool breaker_probe_due (const struct breaker *b, uint64_t now_ns,
                               uint64_t *at)
  __attribute__ ((nonnull (1, 3)));

/* The probe starts now: the state becomes probing. */
extern void breaker_probe_begin (struct breaker *b)
  __attribute__ ((nonnull (1)));

/* A discard command sent at start_ns ended at end_ns: err 0, or failed
 * with errno err, an error that says the device is in trouble (the
 * caller leaves out EOPNOTSUPP and EINVAL, which are about the
 * request).  probe: the one breaker_probe_begin announced.  May change
 * the state, logged.
 */
extern void breaker_record (struct breaker *b, const struct breaker_config *c,
                            uint64_t start_ns, uint64_t end_ns, int err,
                            bool probe)
  __attribute__ ((nonnull (1, 2)));

/* Close it by hand (discardctl resume); logged if it was not closed.
 * A probe in flight still reports, and then changes nothing.
 */
extern void breaker_close (struct breaker *b) __attribute__ ((nonnull (1)));

/* "closed", "open", "probing"; "none", "errors", "latency". */
extern const char *breaker_state_name (enum breaker_state s);
extern const char *breaker_reason_name (enum breaker_reason r);

#endif /* DISCARDCACHE_BREAKER_H */
