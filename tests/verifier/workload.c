/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache verifier: which operation comes next.
 *
 * Uniformly random operations on a disk of thousands of blocks would
 * rarely write a block while a discard over it is pending or in
 * flight, which is the race that matters.  So writes and zeroes often
 * land inside a recent trim, and trims often cover recent writes; the
 * rest is uniform, with some large trims that merge and split many
 * pending extents at once.
 */
#include <config.h>

#include "arith.h"
#include "verify.h"

/* splitmix64: small, fast, and the same stream on every machine. */
uint64_t
rng_next (struct verifier *v)
{
  uint64_t z = (v->rng += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

uint64_t
rng_below (struct verifier *v, uint64_t n)
{
  return n ? rng_next (v) % n : 0;
}

static bool
chance (struct verifier *v, unsigned pct)
{
  return rng_below (v, 100) < pct;
}

static enum op_type
pick_type (struct verifier *v)
{
  unsigned total = 0, dice;

  for (int t = 0; t < OP_TYPES; t++)
    total += v->opt.weight[t];
  dice = rng_below (v, total);
  for (int t = 0; t < OP_TYPES; t++) {
    if (dice < v->opt.weight[t])
      return t;
    dice -= v->opt.weight[t];
  }
  return OP_WRITE;
}

/* Mostly short: a quarter single blocks, the rest up to max_blocks. */
static uint64_t
pick_length (struct verifier *v, uint64_t max_blocks)
{
  if (chance (v, 25))
    return 1;
  return 1 + rng_below (v, max_blocks);
}

/* A first block for n blocks: inside or beside one of the recent
 * ranges when near_pct says so, else anywhere.
 */
static uint64_t
pick_first (struct verifier *v, uint64_t n, const struct range *recent,
            unsigned nrecent, unsigned near_pct)
{
  uint64_t nblocks = v->model.nblocks, first;

  if (nrecent && chance (v, near_pct)) {
    const struct range *r = &recent[rng_below (v, MIN (nrecent, RECENT))];

    /* Anywhere from just before the range to just inside its end. */
    first = r->first + rng_below (v, r->n + 2);
    first = first >= 1 ? first - 1 : 0;
  }
  else
    first = rng_below (v, nblocks);
  return MIN (first, nblocks - n);
}

static bool
all_free (const struct verifier *v, uint64_t first, uint64_t n)
{
  for (uint64_t i = first; i < first + n; i++)
    if (v->model.blk[i].busy)
      return false;
  return true;
}

/* Cut a trim at sectors: a head and a tail that are not whole blocks,
 * so the engine's alignment to granules is exercised too.
 */
static void
unalign (struct verifier *v, struct op_choice *op)
{
  uint64_t head = rng_below (v, BLOCK_SIZE / SECTOR_SIZE) * SECTOR_SIZE;
  uint64_t tail = rng_below (v, BLOCK_SIZE / SECTOR_SIZE) * SECTOR_SIZE;

  if (head + tail >= op->length)
    return;
  op->offset += head;
  op->length -= head + tail;
}

bool
workload_next (struct verifier *v, struct op_choice *op)
{
  uint64_t nblocks = v->model.nblocks, n, first;
  unsigned near;

  op->type = pick_type (v);
  op->flags = 0;
  if (op->type == OP_FLUSH) {
    op->offset = op->length = 0;
    return true;
  }
  if (op->type == OP_TRIM && chance (v, v->opt.large_trim_pct))
    n = 256 + rng_below (v, 4096 - 256);          /* 1 to 16 MiB */
  else
    n = pick_length (v, op->type == OP_TRIM ? 2 * v->opt.max_blocks
                                            : v->opt.max_blocks);
  n = MIN (n, nblocks);
  switch (op->type) {
  case OP_WRITE:
  case OP_ZERO:
    near = 60;
    first = pick_first (v, n, v->recent_trims, v->nrecent_trims, near);
    break;
  case OP_TRIM:
    near = 40;
    first = pick_first (v, n, v->recent_writes, v->nrecent_writes, near);
    break;
  default:
    first = pick_first (v, n, v->recent_trims, v->nrecent_trims, 30);
  }
  if (!all_free (v, first, n))
    return false;
  op->offset = first * BLOCK_SIZE;
  op->length = n * BLOCK_SIZE;
  if (op->type != OP_READ && chance (v, v->opt.fua_pct))
    op->flags |= LIBNBD_CMD_FLAG_FUA;
  if (op->type == OP_ZERO && chance (v, 50))
    op->flags |= LIBNBD_CMD_FLAG_NO_HOLE;   /* else it may trim */
  if (op->type == OP_TRIM && chance (v, v->opt.unaligned_pct))
    unalign (v, op);
  return true;
}

void
workload_note (struct verifier *v, enum op_type type, uint64_t first,
               uint64_t n)
{
  struct range r = { first, n };

  if (type == OP_WRITE)
    v->recent_writes[v->nrecent_writes++ % RECENT] = r;
  else if (type == OP_TRIM)
    v->recent_trims[v->nrecent_trims++ % RECENT] = r;
}
