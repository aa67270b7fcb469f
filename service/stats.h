/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: statistics as text (the statsfile, the control socket's
 * stats, discardfuse's stats file, the debug log), so that every place
 * prints the same names.
 */
#ifndef DISCARDCACHE_STATS_H
#define DISCARDCACHE_STATS_H

#include <stdio.h>

#include "volume.h"

/* Write st as one JSON object followed by a newline.  Returns 0 or -1. */
extern int stats_write_json (const struct volume_stats *st, FILE *fp);

/* Write st as JSON to path atomically (a temporary file in the same
 * directory, then rename), so a reader never sees half a file.  Shared
 * by the front-ends' statsfile= key.  Returns 0, or -1 with the error
 * reported and errno set.
 */
extern int stats_write_file (const struct volume_stats *st, const char *path);

/* Write st as "name value" lines, for logs: emit is called once a line
 * (without a newline), with opaque.
 */
extern void stats_write_lines (const struct volume_stats *st,
                               void (*emit) (const char *line, void *opaque),
                               void *opaque);

#endif /* DISCARDCACHE_STATS_H */
