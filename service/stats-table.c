/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the descriptors of every statistic (see stats-table.h). */
#include <config.h>

#include <stddef.h>

#include "stats-table.h"

#define ENGINE_FIELD(type, name, metric, metric_name, label, scale, help) \
  [STAT_##name] = { #name, STATS_##type, false, STATS_##metric,           \
                    metric_name, label, scale, help,                      \
                    offsetof (struct volume_stats, engine.name) },
#define THIN_FIELD(type, name, metric, metric_name, label, scale, help)   \
  [STAT_thin_##name] = { "thin_" #name, STATS_##type, true,               \
                         STATS_##metric, metric_name, label, scale, help, \
                         offsetof (struct volume_stats, th.name) },

const struct stats_field stats_fields[STATS_NKEYS] = {
  ENGINE_STATS (ENGINE_FIELD)
  THIN_STATS (THIN_FIELD)
};
