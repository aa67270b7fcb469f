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
  *cfg = (struct volume_config) { .reserve = VOLUME_RESERVE_AUTO };
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
  if (n == 0 || n > (UINT64_C (1) << 62))
    return parse_invalid (key, value,
                          PARSE_SIZE_FORMS ", more than 0 and at most 4E");
  *out = n;
  return 0;
}

/* reserve=SIZE or PERCENT% of the exported size (up to two decimals,
 * kept in hundredths of a percent).
 */
static int
set_reserve (struct volume_config *cfg, const char *key, const char *value)
{
  size_t len = strlen (value);
  uint64_t hundredths = 0;
  int digits = 0, decimals = -1;

  if (len == 0 || value[len - 1] != '%') {
    uint64_t n;

    if (parse_size (key, value, &n) == -1)
      return -1;
    cfg->reserve = n;
    cfg->reserve_percent = false;
    return 0;
  }
  for (const char *q = value; q < value + len - 1; q++) {
    if (*q == '.' && decimals < 0 && digits > 0) {
      decimals = 0;
      continue;
    }
    if (*q < '0' || *q > '9' || decimals == 2 || hundredths > 10000)
      goto bad;
    hundredths = hundredths * 10 + (uint64_t) (*q - '0');
    if (decimals >= 0)
      decimals++;
    else
      digits++;
  }
  if (digits == 0 || decimals == 0)
    goto bad;
  for (int d = decimals < 0 ? 0 : decimals; d < 2; d++)
    hundredths *= 10;
  if (hundredths > 10000)
    goto bad;
  cfg->reserve = hundredths;
  cfg->reserve_percent = true;
  return 0;

 bad:
  return parse_invalid (key, value, PARSE_SIZE_FORMS ", or a percentage of "
                        "the exported size from 0% to 100% (up to two "
                        "decimals), e.g. 64M or 1%");
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
  if (strcmp (key, "reserve") == 0)
    return set_reserve (cfg, key, value);
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
  if (!cfg->thin && (cfg->meta || cfg->size ||
                     cfg->reserve != VOLUME_RESERVE_AUTO)) {
    dc_error ("%s is a thin-mode key: add thin=on, or remove it",
              cfg->meta ? "meta=" : cfg->size ? "size=" : "reserve=");
    errno = EINVAL;
    return -1;
  }
  return 0;
}
