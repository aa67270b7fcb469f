/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: discardctl's views of the statistics the server sends
 * (the statsfile's JSON, parsed): a table for people and the Prometheus
 * text format for scrapers.  --json prints the server's line as is.
 */
#ifndef DISCARDCACHE_STATS_FORMAT_H
#define DISCARDCACHE_STATS_FORMAT_H

#include <stdio.h>

#include "json-flat.h"

/* The readable table: sizes in KiB/MiB/..., shares of trimmed bytes. */
extern void stats_print_table (const struct jf_object *st, FILE *fp);

/* discardcache_* metrics with HELP and TYPE lines. */
extern void stats_print_prometheus (const struct jf_object *st, FILE *fp);

#endif /* DISCARDCACHE_STATS_FORMAT_H */
