/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: every statistic the server sends, as one array of
 * descriptors made from the layers' tables (cache/engine/engine-stats.h,
 * volume/thin/thin-stats.h): the JSON key, the type, the Prometheus
 * name, label, type, scale and help, and the place in struct
 * volume_stats.  The server writes its JSON and text lines from it,
 * discardctl its table and its Prometheus text (libstatstable, linked
 * into both).  A statistic is named in code as STAT_name (thin mode's
 * STAT_thin_name): a misspelt name does not compile.
 */
#ifndef DISCARDCACHE_STATS_TABLE_H
#define DISCARDCACHE_STATS_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "volume.h"

enum stats_type { STATS_U64, STATS_INT, STATS_BOOL, STATS_PACE, STATS_STR };
enum stats_metric { STATS_NONE, STATS_COUNTER, STATS_GAUGE, STATS_STATE };

enum stats_key {
#define STATS_KEY_ENGINE(type, name, ...) STAT_##name,
  ENGINE_STATS (STATS_KEY_ENGINE)
#undef STATS_KEY_ENGINE
#define STATS_KEY_THIN(type, name, ...) STAT_thin_##name,
  THIN_STATS (STATS_KEY_THIN)
#undef STATS_KEY_THIN
  STATS_NKEYS
};

struct stats_field {
  const char *key;              /* JSON key and text name */
  enum stats_type type;
  bool thin;                    /* thin mode's: sent only with thin=on */
  enum stats_metric metric;     /* STATS_NONE: not in Prometheus */
  const char *metric_name;      /* discardcache_NAME */
  const char *label;            /* NAME{label}, or NULL */
  double scale;                 /* Prometheus shows value / scale */
  const char *help;
  size_t offset;                /* in struct volume_stats */
};

/* In JSON order: the engine's, then thin mode's. */
extern const struct stats_field stats_fields[STATS_NKEYS];

/* The key of k, as the JSON names it. */
static inline const char *
stats_key_name (enum stats_key k)
{
  return stats_fields[k].key;
}

#endif /* DISCARDCACHE_STATS_TABLE_H */
