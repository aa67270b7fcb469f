/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the vocabulary of the statistics tables.  Each layer
 * that owns statistics lists them once, in an X-macro of its own
 * (cache/engine/engine-stats.h, volume/thin/thin-stats.h), one entry a field:
 *
 *   X (TYPE, name, METRIC, "metric_name", "label", SCALE, "help")
 *
 * TYPE     the C type: U64, INT, BOOL, PACE (enum pace_mode) or STR
 *          (a name from a fixed set, NULL read as "");
 * name     the struct member, the JSON key and the text line's name
 *          (thin mode's get a thin_ prefix in JSON and text);
 * METRIC   COUNTER, GAUGE, STATE (a STR field as a state set: one
 *          series NAME{label="value"} 1, label naming the label's key),
 *          or NONE (not exported to Prometheus);
 * metric_name  discardcache_NAME in Prometheus, in base units, counters
 *          ending in _total; entries sharing a name form one family
 *          told apart by label ("reason=\"full\"", or NULL), whose
 *          HELP is the first entry's;
 * SCALE    what the value is divided by for Prometheus's base units:
 *          1, STATS_US (microseconds), STATS_MS (milliseconds) or
 *          STATS_US_PER_GIB (microseconds per GiB to seconds per byte);
 * help     what it counts, one sentence (Prometheus's HELP).
 *
 * The layer's header expands its table into its struct with
 * STATS_MEMBER; service/stats-table.c expands it into the descriptors
 * from which the JSON, the text lines, discardctl's table and its
 * Prometheus text are all written.
 */
#ifndef DISCARDCACHE_STATS_DEF_H
#define DISCARDCACHE_STATS_DEF_H

#include <stdbool.h>
#include <stdint.h>

#define STATS_CTYPE_U64 uint64_t
#define STATS_CTYPE_INT int
#define STATS_CTYPE_BOOL bool
#define STATS_CTYPE_PACE enum pace_mode
#define STATS_CTYPE_STR const char *

/* For an X-macro: one struct member. */
#define STATS_MEMBER(type, name, metric, metric_name, label, scale, help) \
  STATS_CTYPE_##type name;

#define STATS_US 1e6                    /* microseconds to seconds */
#define STATS_MS 1e3                    /* milliseconds to seconds */
#define STATS_US_PER_GIB (1e6 * 1073741824.0) /* us per GiB to s per byte */

#endif /* DISCARDCACHE_STATS_DEF_H */
