/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: numbers as people read them (see human.h). */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>

#include "human.h"

const char *
human_size (uint64_t bytes, char buf[HUMAN_LEN])
{
  static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  double v = bytes;
  int u = -1;

  if (bytes < 1024) {
    snprintf (buf, HUMAN_LEN, "%" PRIu64 " B", bytes);
    return buf;
  }
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  snprintf (buf, HUMAN_LEN, "%.1f %s", v, units[u]);
  return buf;
}

const char *
human_duration (uint64_t ms, char buf[HUMAN_LEN])
{
  uint64_t s = ms / 1000;

  if (ms < 1000)
    snprintf (buf, HUMAN_LEN, "%" PRIu64 " ms", ms);
  else if (s < 60)
    snprintf (buf, HUMAN_LEN, "%.1f s", ms / 1000.0);
  else if (s < 3600)
    snprintf (buf, HUMAN_LEN, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
  else
    snprintf (buf, HUMAN_LEN, "%" PRIu64 "h%02" PRIu64 "m", s / 3600,
              s / 60 % 60);
  return buf;
}

const char *
human_percent (uint64_t part, uint64_t whole, char buf[HUMAN_LEN])
{
  if (whole == 0)
    snprintf (buf, HUMAN_LEN, "n/a");
  else
    snprintf (buf, HUMAN_LEN, "%.0f%%", 100.0 * part / whole);
  return buf;
}
