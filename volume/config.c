/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the volume's keys (see volume.h). */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "log.h"
#include "parse.h"
#include "volume.h"

void
volume_config_init (struct volume_config *cfg)
{
  *cfg = (struct volume_config) { .slot = 0 };
}

void
volume_config_free (struct volume_config *cfg)
{
  free (cfg->meta);
  cfg->meta = NULL;
}

static int
set_size (const char *key, const char *value, uint64_t *out)
{
  uint64_t n;

  if (parse_size (key, value, &n) == -1)
    return -1;
  if (n == 0 || n > (UINT64_C (1) << 62)) {
    dc_error ("%s=%s: invalid value: expected %s, more than 0 and at most "
              "4E", key, value, PARSE_SIZE_FORMS);
    errno = EINVAL;
    return -1;
  }
  *out = n;
  return 0;
}

int
volume_config_set (struct volume_config *cfg, const char *key,
                   const char *value)
{
  if (strcmp (key, "thin") == 0)
    return parse_bool (key, value, &cfg->thin);
  if (strcmp (key, "slot") == 0)
    /* At least a sector, at most 1 GiB (one slot is zero-filled and
     * discarded in one piece); auto (0) is chosen at open.
     */
    return parse_auto_size (key, value, "auto, or a power of two from 512 "
                            "to 1G, such as 4k", 512, UINT64_C (1) << 30,
                            true, &cfg->slot);
  if (strcmp (key, "size") == 0)
    return set_size (key, value, &cfg->size);
  if (strcmp (key, "meta") == 0)
    return parse_path (key, value, "the path of a file, e.g. /var/lib/dc.meta",
                       &cfg->meta);
  return 1;
}

int
volume_config_complete (const struct volume_config *cfg)
{
  if (cfg->thin && cfg->meta == NULL) {
    dc_error ("thin=on needs meta=FILE: the file that keeps the slot map "
              "and its journal (created if missing)");
    errno = EINVAL;
    return -1;
  }
  if (!cfg->thin && (cfg->meta || cfg->size)) {
    dc_error ("%s is a thin-mode key: add thin=on, or remove it",
              cfg->meta ? "meta=" : "size=");
    errno = EINVAL;
    return -1;
  }
  return 0;
}
