/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: statistics as JSON and as log lines (see stats.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "fileio.h"
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

struct stats_fill {
  const struct volume_stats *st;
};

static int
fill_stats (int fd, void *opaque)
{
  const struct stats_fill *f = opaque;
  int copy = dup (fd);
  FILE *fp = copy == -1 ? NULL : fdopen (copy, "w");
  int r;

  if (fp == NULL) {
    if (copy != -1)
      close (copy);
    return -1;
  }
  r = stats_write_json (f->st, fp);
  if (r == -1 && errno == 0)
    errno = EIO;
  if (fclose (fp) == EOF)
    r = -1;
  return r;
}

int
stats_write_file (const struct volume_stats *st, const char *path)
{
  struct stats_fill f = { .st = st };
  const char *step;

  /* 0644: node-exporter's textfile collector reads it as another user. */
  if (fileio_replace (path, 0644, FILEIO_DIR_SOFT, fill_stats, &f, &step) == 0)
    return 0;
  dc_error ("statsfile=%s: cannot %s %s.tmp: %m", path, step, path);
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
