/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the engine's settings, parsed from key=value pairs in the
 * same way by every front-end (the service layer's key table dispatches
 * the engine's keys here).
 */
#ifndef DISCARDCACHE_ENGINE_CONFIG_H
#define DISCARDCACHE_ENGINE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "breaker.h"
#include "window.h"

enum on_full_policy {
  ON_FULL_FORWARD,             /* forward the oldest pending extents */
  ON_FULL_DROP,                /* drop the oldest, counted */
};

struct engine_config {
  uint64_t delay_ms;           /* a trim waits this long before forwarding */
  uint64_t minlen;             /* shorter pending extents are not forwarded by the flusher */
  bool small_auto;             /* small=auto: the threshold from the cost model */
  uint64_t small;              /* small=SIZE: shorter extents held (small.h); 0: off */
  uint64_t granularity;        /* 0: the backend's discard granularity */
  uint64_t max_discard;        /* 0: the backend's maximum discard size */
  uint64_t idle_ms;            /* clients quiet this long before forwarding */
  uint64_t rate;               /* discards per second, 0 = unlimited */
  uint64_t budget_ms;          /* extra client p99 forwarding may cause; 0: off */
  uint64_t max_extents;        /* memory bound on pending extents */
  uint64_t max_clean_extents;  /* bound on the known-clean map; 0: off */
  enum on_full_policy on_full;
  bool flush_discards;         /* client FLUSH forwards pending discards first */
  bool passthrough;            /* forward every trim at once (baseline) */
  bool journal;                /* with state: keep the sets across a crash */
  /* low-water=: below this much free space on the backend, forward all
   * at once (cache/engine/engine-pressure.c).  Parts per million of the backend's
   * store, or bytes; both 0: off.
   */
  uint64_t low_water_ppm;
  uint64_t low_water_bytes;
  char *state;                 /* state file path (owned); NULL: none */
  struct breaker_config breaker; /* breaker-errors, -latency, -window, -backoff */
  struct window_set windows;   /* window=: none, forward at any time */
  uint64_t proof_ppm;          /* proof=: share of discards checked, per million */
  uint64_t proof_bytes;        /* proof-bytes=: at most this much of one checked */
  bool proof_adapt;            /* proof-adapt=: raise the granularity if ineffective */
};

/* proof='s default: 1% of the forwarded discards are checked. */
#define ENGINE_DEFAULT_PROOF_PPM 10000

/* budget='s default: pacing is on unless budget=off.  2 ms: in the
 * pacing benchmark (docs/benchmarks-pacing.md) it keeps the client p99
 * within itself of the no-TRIM baseline on both device models and the
 * backlog bounded under sustained load with no idle gap.
 */
#define ENGINE_DEFAULT_BUDGET_MS 2

/* The keys engine_set accepts while running, for messages. */
extern const char engine_config_runtime_keys[];

/* Fill in the defaults documented in the man page. */
extern void engine_config_init (struct engine_config *cfg);

/* Release what the config owns. */
extern void engine_config_free (struct engine_config *cfg);

/* Copy src into dst, duplicating the strings.  Returns 0 or -1 (ENOMEM,
 * reported; dst then owns nothing).
 */
extern int engine_config_copy (struct engine_config *dst,
                               const struct engine_config *src);

/* Apply one key=value.  Returns 0 on success, -1 (error reported, errno
 * EINVAL, cfg unchanged) for a bad value, 1 if key is not an engine key.
 */
extern int engine_config_set (struct engine_config *cfg, const char *key,
                              const char *value);

/* Whether key may be changed while the engine runs (control socket). */
extern bool engine_config_key_is_runtime (const char *key);

/* The accepted forms of a runtime key's value ("a duration: ..."), for
 * the control socket's error replies; NULL for any other key.
 */
extern const char *engine_config_forms (const char *key);

#endif /* DISCARDCACHE_ENGINE_CONFIG_H */
