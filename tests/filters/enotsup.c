/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: an nbdkit filter whose trims start failing with
 * ENOTSUP after the first N (enotsup-after=N, default 0), while the
 * export keeps advertising trim: a store that turns out not to support
 * discard only when asked, which nbdkit's error filter cannot model (it
 * injects only EPERM, EIO, ENOMEM, EINVAL, ENOSPC and ESHUTDOWN).
 */
#include <config.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>

static uint64_t after;
static atomic_uint_fast64_t trims;

static int
enotsup_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                const char *key, const char *value)
{
  if (strcmp (key, "enotsup-after") == 0)
    return nbdkit_parse_uint64_t ("enotsup-after", value, &after);
  return next (nxdata, key, value);
}

static int
enotsup_trim (nbdkit_next *next, void *handle, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  if (atomic_fetch_add (&trims, 1) >= after) {
    *err = ENOTSUP;
    return -1;
  }
  return next->trim (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "enotsup",
  .longname = "discardcache test filter: trims fail with ENOTSUP",
  .config = enotsup_config,
  .config_help = "enotsup-after=N   Trims after the first N fail (0).",
  .trim = enotsup_trim,
};

/* NBDKIT_REGISTER_FILTER defines filter_init without a prototype. */
struct nbdkit_filter *filter_init (void);
NBDKIT_REGISTER_FILTER (filter)
