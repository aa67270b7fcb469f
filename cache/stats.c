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
  X (max_extents) X (memory_bytes)                          \
  X (state_loaded_extents) X (state_loaded_bytes)

int
stats_write_json (const struct engine_stats *st, FILE *fp)
{
  fprintf (fp, "{\"version\":1");
#define JSON_FIELD(name) fprintf (fp, ",\"" #name "\":%" PRIu64, st->name);
  STATS_U64 (JSON_FIELD)
#undef JSON_FIELD
  fprintf (fp, ",\"last_error\":%d,\"discard_supported\":%s,\"paused\":%s}\n",
           st->last_error, st->discard_supported ? "true" : "false",
           st->paused ? "true" : "false");
  return ferror (fp) ? -1 : 0;
}

int
stats_write_file (const struct engine_stats *st, const char *path)
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
stats_write_lines (const struct engine_stats *st,
                   void (*emit) (const char *line, void *opaque),
                   void *opaque)
{
  char line[128];

#define LINE_FIELD(name)                                                  \
  snprintf (line, sizeof line, "%-26s %" PRIu64, #name, st->name);        \
  emit (line, opaque);
  STATS_U64 (LINE_FIELD)
#undef LINE_FIELD
  snprintf (line, sizeof line, "%-26s %d", "last_error", st->last_error);
  emit (line, opaque);
  snprintf (line, sizeof line, "%-26s %s", "discard_supported",
            st->discard_supported ? "yes" : "no (backend: TRIM not supported)");
  emit (line, opaque);
}
