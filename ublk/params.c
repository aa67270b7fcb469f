/* SPDX-License-Identifier: BSD-3-Clause */
/* discardublk: what the kernel is told about the device.  Its size and
 * limits are the volume's; a volatile cache with FUA, so that the kernel
 * sends FLUSH (volume_flush makes acknowledged writes durable) and FUA
 * writes; discard with the engine's granularity, and write-zeroes.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "arith.h"
#include "discardublk.h"
#include "log.h"

#define SECTOR_SHIFT 9

/* log2 of a power of two (0 for anything else). */
static unsigned
shift_of (uint64_t v)
{
  return v && (v & (v - 1)) == 0 ? (unsigned) __builtin_ctzll (v) : 0;
}

/* The smallest unit the backend writes whole: at least a sector, at
 * most a page (the kernel's bound on a logical block).
 */
static unsigned
block_shift (const struct backend_limits *lim, uint32_t value)
{
  unsigned s = shift_of (value);

  (void) lim;
  return s < SECTOR_SHIFT ? SECTOR_SHIFT : s > 12 ? 12 : s;
}

static void
fill_basic (const struct dublk *d, struct ublk_param_basic *b)
{
  const struct backend_limits *lim = volume_limits (d->volume);

  b->attrs = UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA;
  if (lim->read_only)
    b->attrs |= UBLK_ATTR_READ_ONLY;
  b->logical_bs_shift = block_shift (lim, lim->min_block);
  b->physical_bs_shift = MAX (b->logical_bs_shift,
                              block_shift (lim, lim->pref_block ? lim->pref_block : 4096));
  b->io_min_shift = b->physical_bs_shift;
  b->io_opt_shift = b->physical_bs_shift;
  b->max_sectors = d->info.max_io_buf_bytes >> SECTOR_SHIFT;
  b->dev_sectors = volume_size (d->volume) >> SECTOR_SHIFT;
}

/* The engine acknowledges discards of any size at once and merges them
 * itself, so the kernel need not cut them finer than the backend's
 * largest; granularity is the engine's, which the flusher honours.
 * Write-zeroes goes through volume_zero, which writes zeros where the
 * backend cannot zero efficiently: smaller pieces then.
 */
static void
fill_discard (const struct dublk *d, struct ublk_param_discard *p)
{
  const struct backend_limits *lim = volume_limits (d->volume);
  uint64_t gran = MAX (volume_granularity (d->volume), UINT64_C (512));
  uint64_t max = MIN (lim->max_discard >> SECTOR_SHIFT, (uint64_t) UINT32_MAX);

  p->discard_alignment = 0;
  p->discard_granularity = MIN (gran, (uint64_t) UINT32_MAX / 2 + 1);
  p->max_discard_sectors = max ? max : UINT32_MAX;
  p->max_discard_segments = 1;        /* the only count ublk accepts */
  p->max_write_zeroes_sectors =
    lim->can_zero ? p->max_discard_sectors : (8u << 20) >> SECTOR_SHIFT;
}

void
dublk_params_fill (const struct dublk *d, struct ublk_params *p)
{
  memset (p, 0, sizeof *p);
  p->len = sizeof *p;
  p->types = UBLK_PARAM_TYPE_BASIC;
  fill_basic (d, &p->basic);
  if (!volume_limits (d->volume)->read_only) {
    p->types |= UBLK_PARAM_TYPE_DISCARD;
    fill_discard (d, &p->discard);
  }
}

int
dublk_params_check (const struct dublk *d, const struct ublk_params *p)
{
  struct ublk_params want;

  dublk_params_fill (d, &want);
  if (p->basic.dev_sectors != want.basic.dev_sectors ||
      p->basic.logical_bs_shift != want.basic.logical_bs_shift) {
    dc_error ("--recover: ublk device %u has %llu sectors of %u bytes, the "
              "volume %llu of %u: not the device these keys made",
              d->info.dev_id, (unsigned long long) p->basic.dev_sectors,
              1u << p->basic.logical_bs_shift,
              (unsigned long long) want.basic.dev_sectors,
              1u << want.basic.logical_bs_shift);
    errno = EINVAL;
    return -1;
  }
  return 0;
}
