/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: statistics as JSON and as log lines (see stats.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "stats.h"
#include "stats-table.h"

/* A field's value as text: JSON's form, or the text lines'. */
static void
field_text (const struct stats_field *f, const struct volume_stats *st,
            bool json, char *buf, size_t len)
{
  const char *p = (const char *) st + f->offset;

  switch (f->type) {
  case STATS_U64:
    snprintf (buf, len, "%" PRIu64, *(const uint64_t *) p);
    break;
  case STATS_INT:
    snprintf (buf, len, "%d", *(const int *) p);
    break;
  case STATS_BOOL:
    snprintf (buf, len, "%s", *(const bool *) p ? (json ? "true" : "yes")
                                                 : (json ? "false" : "no"));
    break;
  case STATS_PACE:
    snprintf (buf, len, json ? "\"%s\"" : "%s",
              pace_mode_name (*(const enum pace_mode *) p));
    break;
  case STATS_STR:
    snprintf (buf, len, json ? "\"%s\"" : "%s",
              *(const char *const *) p ? *(const char *const *) p : "");
    break;
  }
}

/* The fields in the order both formats list them: the counters (u64)
 * first, the engine's then thin mode's (with thin=on only), then the
 * others.  Calls fn for each, in that order.
 */
static void
for_each_field (const struct volume_stats *st,
                void (*fn) (const struct stats_field *f, void *opaque),
                void *opaque)
{
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < STATS_NKEYS; i++) {
      const struct stats_field *f = &stats_fields[i];

      if ((f->type == STATS_U64) == (pass == 0) && (!f->thin || st->thin))
        fn (f, opaque);
    }
}

struct writer {
  const struct volume_stats *st;
  FILE *fp;
  void (*emit) (const char *line, void *opaque);
  void *opaque;
};

static void
json_field (const struct stats_field *f, void *opaque)
{
  struct writer *w = opaque;
  char value[64];

  field_text (f, w->st, true, value, sizeof value);
  fprintf (w->fp, ",\"%s\":%s", f->key, value);
}

int
stats_write_json (const struct volume_stats *st, FILE *fp)
{
  struct writer w = { .st = st, .fp = fp };

  fprintf (fp, "{\"version\":1");
  for_each_field (st, json_field, &w);
  fprintf (fp, "}\n");
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

static void
line_field (const struct stats_field *f, void *opaque)
{
  struct writer *w = opaque;
  char value[64], line[128];

  field_text (f, w->st, false, value, sizeof value);
  snprintf (line, sizeof line, "%-26s %s", f->key, value);
  w->emit (line, w->opaque);
}

void
stats_write_lines (const struct volume_stats *st,
                   void (*emit) (const char *line, void *opaque),
                   void *opaque)
{
  struct writer w = { .st = st, .emit = emit, .opaque = opaque };

  for_each_field (st, line_field, &w);
}
