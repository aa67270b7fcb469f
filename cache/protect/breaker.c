/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the circuit breaker (see breaker.h). */
#include <config.h>

#include <inttypes.h>
#include <string.h>

#include "arith.h"
#include "breaker.h"
#include "log.h"
#include "verify.h"

#define NS_PER_MS UINT64_C (1000000)

void
breaker_init (struct breaker *b)
{
  memset (b, 0, sizeof *b);
  b->state = BREAKER_CLOSED;
  b->reason = BREAKER_REASON_NONE;
}

bool
breaker_holds (const struct breaker *b)
{
  return b->state != BREAKER_CLOSED;
}

bool
breaker_probe_due (const struct breaker *b, uint64_t now_ns, uint64_t *at)
{
  if (b->state == BREAKER_PROBING) {
    *at = UINT64_MAX;
    return false;
  }
  if (b->state == BREAKER_CLOSED || now_ns >= b->next_probe_ns) {
    *at = now_ns;
    return b->state == BREAKER_OPEN;
  }
  *at = b->next_probe_ns;
  return false;
}

void
breaker_probe_begin (struct breaker *b)
{
  /* Only an open breaker whose probe is due (breaker_probe_due) sends
   * one: a probe of a closed one would hold forwarding after it.
   */
  VERIFY3U (b->state, ==, BREAKER_OPEN);
  b->state = BREAKER_PROBING;
  b->probes++;
}

/* Hold forwarding until now + the backoff. */
static void
hold (struct breaker *b, uint64_t now_ns)
{
  b->state = BREAKER_OPEN;
  b->next_probe_ns = now_ns + b->backoff_ms * NS_PER_MS;
}

static void
open_for (struct breaker *b, const struct breaker_config *c,
          enum breaker_reason reason, uint64_t now_ns, int err)
{
  b->reason = reason;
  b->opened++;
  b->backoff_ms = MAX (c->backoff_ms, UINT64_C (1));
  hold (b, now_ns);
  if (reason == BREAKER_REASON_ERRORS)
    dc_error ("circuit breaker open: %" PRIu64 " consecutive discard errors "
              "(last: %s): forwarding held, first probe in %" PRIu64 " ms",
              b->consecutive_errors, strerror (err), b->backoff_ms);
  else
    dc_error ("circuit breaker open: discards slower than %" PRIu64 " ms for "
              "%" PRIu64 " ms: forwarding held, first probe in %" PRIu64
              " ms", c->latency_ms, c->window_ms, b->backoff_ms);
}

/* A failed or slow probe: wait twice as long for the next one. */
static void
probe_failed (struct breaker *b, uint64_t now_ns, int err, uint64_t took_ms)
{
  b->backoff_ms = MIN (b->backoff_ms * 2, BREAKER_MAX_BACKOFF_MS);
  hold (b, now_ns);
  if (err)
    dc_debug ("circuit breaker: probe failed (%s): next in %" PRIu64 " ms",
              strerror (err), b->backoff_ms);
  else
    dc_debug ("circuit breaker: probe took %" PRIu64 " ms: next in %"
              PRIu64 " ms", took_ms, b->backoff_ms);
}

/* Errors and latency are tracked whatever the state, so that a run of
 * slow discards that began before a probe still counts.
 */
static bool
track_latency (struct breaker *b, const struct breaker_config *c,
               uint64_t start_ns, uint64_t end_ns, bool *slow)
{
  *slow = c->latency_ms && end_ns - start_ns > c->latency_ms * NS_PER_MS;
  if (!*slow) {
    b->slow = false;
    return false;
  }
  if (!b->slow) {
    b->slow = true;
    b->slow_since_ns = start_ns;
  }
  return end_ns - b->slow_since_ns >= c->window_ms * NS_PER_MS;
}

void
breaker_record (struct breaker *b, const struct breaker_config *c,
                uint64_t start_ns, uint64_t end_ns, int err, bool probe)
{
  bool slow = false, sustained = false;

  if (err) {
    b->consecutive_errors++;
    b->slow = false;
  }
  else {
    b->consecutive_errors = 0;
    sustained = track_latency (b, c, start_ns, end_ns, &slow);
  }
  if (probe && b->state == BREAKER_PROBING) {
    if (err || slow) {
      probe_failed (b, end_ns, err, (end_ns - start_ns) / NS_PER_MS);
      return;
    }
    b->state = BREAKER_CLOSED;
    dc_error ("circuit breaker closed: a probe discard succeeded in %" PRIu64
              " ms: forwarding resumes", (end_ns - start_ns) / NS_PER_MS);
    b->reason = BREAKER_REASON_NONE;
    b->slow = false;
    return;
  }
  if (b->state != BREAKER_CLOSED)
    return;
  if (err && c->errors && b->consecutive_errors >= c->errors)
    open_for (b, c, BREAKER_REASON_ERRORS, end_ns, err);
  else if (sustained)
    open_for (b, c, BREAKER_REASON_LATENCY, end_ns, 0);
}

void
breaker_close (struct breaker *b)
{
  if (b->state != BREAKER_CLOSED)
    dc_error ("circuit breaker closed by hand (discardctl resume): "
              "forwarding resumes");
  b->state = BREAKER_CLOSED;
  b->reason = BREAKER_REASON_NONE;
  b->consecutive_errors = 0;
  b->slow = false;
}

const char *
breaker_state_name (enum breaker_state s)
{
  switch (s) {
  case BREAKER_CLOSED: return "closed";
  case BREAKER_OPEN: return "open";
  case BREAKER_PROBING: return "probing";
  }
  return "?";
}

const char *
breaker_reason_name (enum breaker_reason r)
{
  switch (r) {
  case BREAKER_REASON_NONE: return "none";
  case BREAKER_REASON_ERRORS: return "errors";
  case BREAKER_REASON_LATENCY: return "latency";
  }
  return "?";
}
