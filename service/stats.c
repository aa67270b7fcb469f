/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: statistics as JSON and as log lines (see stats.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "stats.h"

/* One table drives both formats so a counter cannot be missing from one. */
#define STATS_U64(X)                                        \
  X (trims) X (trim_bytes)                                  \
  X (cancelled_by_writes) X (cancelled_by_zeroes)           \
  X (merges) X (forwarded) X (forwarded_bytes)              \
  X (dropped) X (dropped_bytes) X (dropped_full_bytes)      \
  X (dropped_unsupported_bytes) X (dropped_fragment_bytes)  \
  X (dropped_nomem_bytes) X (dropped_error_bytes)           \
  X (pending_extents) X (pending_bytes) X (subgranule_bytes)\
  X (inflight) X (inflight_bytes) X (write_waits)           \
  X (forward_errors) X (granularity) X (max_discard)        \
  X (max_extents) X (memory_bytes) X (backend_allocated_bytes) \
  X (state_loaded_extents) X (state_loaded_bytes)           \
  X (already_clean_bytes) X (clean_extents) X (clean_bytes) \
  X (clean_memory_bytes) X (clean_forgotten_bytes)          \
  X (max_clean_extents)                                     \
  X (state_loaded_clean_extents) X (state_loaded_clean_bytes) \
  X (discard_p50_us_64k) X (discard_p99_us_64k)             \
  X (discard_p50_us_1m) X (discard_p99_us_1m)               \
  X (discard_p50_us_16m) X (discard_p99_us_16m)             \
  X (discard_p50_us_large) X (discard_p99_us_large)         \
  X (client_p99_us) X (client_p99_discard_us)               \
  X (client_p99_all_us)                                     \
  X (client_requests_discard) X (client_requests)           \
  X (model_a_us) X (model_b_us_per_gib) X (stall_us)        \
  X (budget_us) X (pace_bytes_per_s) X (pace_commands_per_s)\
  X (pace_max_len) X (pace_gap_us) X (pace_rare_share_ppm)  \
  X (budget_overruns)                                       \
  X (drain_eta_ms) X (forced_by_memory)

/* Thin mode's, present only with thin=on, named thin_NAME. */
#define STATS_THIN_U64(X)                                   \
  X (slot) X (size) X (slots)                               \
  X (trims) X (trim_bytes) X (mapped) X (mapped_runs)       \
  X (free_clean) X (free_clean_runs) X (free_zero)          \
  X (free_pending) X (free_pending_runs)                    \
  X (free_pending_largest)                                  \
  X (free_undurable) X (allocated) X (reused)               \
  X (enospc) X (zero_fills) X (map_bytes) X (memory_bytes)  \
  X (commits) X (journal_bytes)                             \
  X (checkpoints) X (last_checkpoint)

int
stats_write_json (const struct volume_stats *st, FILE *fp)
{
  const struct engine_stats *es = &st->engine;

  fprintf (fp, "{\"version\":1");
#define JSON_FIELD(name) fprintf (fp, ",\"" #name "\":%" PRIu64, es->name);
  STATS_U64 (JSON_FIELD)
#undef JSON_FIELD
#define JSON_THIN(name) fprintf (fp, ",\"thin_" #name "\":%" PRIu64, st->th.name);
  if (st->thin) {
    STATS_THIN_U64 (JSON_THIN)
  }
#undef JSON_THIN
  fprintf (fp, ",\"last_error\":%d,\"discard_supported\":%s,\"paused\":%s,"
           "\"pace_mode\":\"%s\"}\n",
           es->last_error, es->discard_supported ? "true" : "false",
           es->paused ? "true" : "false",
           es->pace_mode ? es->pace_mode : "off");
  return ferror (fp) ? -1 : 0;
}

int
stats_write_file (const struct volume_stats *st, const char *path)
{
  CLEANUP_FREE char *tmp = NULL;
  FILE *fp;
  int saved_errno;

  if (asprintf (&tmp, "%s.tmp", path) == -1) {
    dc_error ("asprintf: %m");
    return -1;
  }
  fp = fopen (tmp, "w");
  if (fp == NULL) {
    dc_error ("statsfile: %s: %m", tmp);
    return -1;
  }
  if (stats_write_json (st, fp) == -1) {
    saved_errno = errno ? errno : EIO;
    fclose (fp);
    goto err;
  }
  if (fclose (fp) == EOF) {
    saved_errno = errno;
    goto err;
  }
  if (rename (tmp, path) == -1) {
    dc_error ("statsfile: rename %s to %s: %m", tmp, path);
    unlink (tmp);
    return -1;
  }
  return 0;

 err:
  errno = saved_errno;
  dc_error ("statsfile: %s: write error: %m", tmp);
  unlink (tmp);
  errno = saved_errno;
  return -1;
}

void
stats_write_lines (const struct volume_stats *st,
                   void (*emit) (const char *line, void *opaque),
                   void *opaque)
{
  const struct engine_stats *es = &st->engine;
  char line[128];

#define LINE_FIELD(name)                                                  \
  snprintf (line, sizeof line, "%-26s %" PRIu64, #name, es->name);        \
  emit (line, opaque);
  STATS_U64 (LINE_FIELD)
#undef LINE_FIELD
#define LINE_THIN(name)                                                   \
  snprintf (line, sizeof line, "%-26s %" PRIu64, "thin_" #name,           \
            st->th.name);                                                 \
  emit (line, opaque);
  if (st->thin) {
    STATS_THIN_U64 (LINE_THIN)
  }
#undef LINE_THIN
  snprintf (line, sizeof line, "%-26s %d", "last_error", es->last_error);
  emit (line, opaque);
  snprintf (line, sizeof line, "%-26s %s", "discard_supported",
            es->discard_supported ? "yes" : "no (backend: TRIM not supported)");
  emit (line, opaque);
  snprintf (line, sizeof line, "%-26s %s", "pace_mode",
            es->pace_mode ? es->pace_mode : "off");
  emit (line, opaque);
}
