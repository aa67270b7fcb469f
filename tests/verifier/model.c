/* discardcache verifier: the block model (see model.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define PATTERN_MAGIC UINT64_C (0x44435646)   /* "DCVF" */
#define WORDS_PER_SECTOR (SECTOR_SIZE / 8)
#define SECTORS (BLOCK_SIZE / SECTOR_SIZE)

const char *const op_names[OP_TYPES] = {
  [OP_WRITE] = "write", [OP_TRIM] = "trim", [OP_ZERO] = "zero",
  [OP_FLUSH] = "flush", [OP_READ] = "read", [OP_CHECK] = "check",
};

int
model_init (struct model *m, uint64_t nblocks)
{
  *m = (struct model) { .nblocks = nblocks };
  m->blk = calloc (nblocks, sizeof *m->blk);
  if (m->blk == NULL) {
    perror ("calloc");
    return -1;
  }
  return 0;
}

void
model_free (struct model *m)
{
  free (m->blk);
  m->blk = NULL;
}

static uint64_t
mix (uint64_t z)
{
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Every sector starts with a header naming its block, sector and
 * version, so a stale or misplaced sector can be told apart from
 * garbage when it turns up somewhere it should not.
 */
static void
sector_fill (uint64_t *w, uint64_t block, unsigned sector, uint32_t version)
{
  uint64_t seed = mix (block * 0x9e3779b97f4a7c15 + version);

  w[0] = PATTERN_MAGIC << 32 | version;
  w[1] = block * SECTORS + sector;
  for (unsigned i = 2; i < WORDS_PER_SECTOR; i++)
    w[i] = mix (seed + sector * WORDS_PER_SECTOR + i);
}

void
pattern_fill (void *buf, uint64_t block, uint32_t version)
{
  uint64_t *w = buf;

  if (version == 0) {
    memset (buf, 0, BLOCK_SIZE);
    return;
  }
  for (unsigned s = 0; s < SECTORS; s++)
    sector_fill (w + s * WORDS_PER_SECTOR, block, s, version);
}

static void
add_event (struct blk *b, uint64_t seq, enum op_type type, uint32_t version,
           bool fua, int err)
{
  b->hist[b->nhist % HISTORY] = (struct blk_event) {
    .seq = seq, .version = version, .type = type, .fua = fua, .err = err,
  };
  /* Keep nhist in [HISTORY, 2*HISTORY) once full, so the ring index
   * stays right without a wide counter.
   */
  b->nhist = b->nhist + 1 >= 2 * HISTORY ? HISTORY : b->nhist + 1;
}

/* The state after one operation on one block. */
static void
apply (struct blk *b, enum op_type type, uint32_t version, int err)
{
  switch (type) {
  case OP_WRITE:
  case OP_ZERO:
    if (err) {
      b->kind = BLK_UNKNOWN;    /* a failed write may have done part */
      return;
    }
    b->kind = BLK_DATA;
    b->version = type == OP_WRITE ? version : 0;
    b->may_zero = false;
    return;
  case OP_TRIM:
    /* Failed or not, a trim may have reached the store. */
    if (b->kind == BLK_DATA && b->version != 0)
      b->may_zero = true;
    return;
  default:
    return;
  }
}

void
model_complete (struct model *m, enum op_type type, uint64_t first,
                uint64_t n, const uint32_t *versions, bool fua, int err)
{
  uint64_t seq = ++m->seq;

  for (uint64_t i = 0; i < n; i++) {
    struct blk *b = &m->blk[first + i];
    uint32_t v = versions ? versions[i] : 0;

    add_event (b, seq, type, v, fua, err);
    if (type == OP_WRITE || type == OP_ZERO || type == OP_TRIM) {
      apply (b, type, v, err);
      b->changed_seq = seq;
    }
  }
}

void
model_flushed (struct model *m, uint64_t issued_at)
{
  if (issued_at > m->durable_seq)
    m->durable_seq = issued_at;
}

void
model_forget_volatile (struct model *m)
{
  for (uint64_t i = 0; i < m->nblocks; i++)
    if (m->blk[i].changed_seq > m->durable_seq)
      m->blk[i].kind = BLK_UNKNOWN;
}

static bool
is_zero (const void *buf, size_t len)
{
  const unsigned char *p = buf;

  return len == 0 || (p[0] == 0 && memcmp (p, p + 1, len - 1) == 0);
}

/* What a sector that is not the expected one holds, in words. */
static void
describe_sector (const uint64_t *w, char *out, size_t size)
{
  if (is_zero (w, SECTOR_SIZE))
    snprintf (out, size, "zeros");
  else if (w[0] >> 32 == PATTERN_MAGIC)
    snprintf (out, size, "block %" PRIu64 " sector %" PRIu64 " version %"
              PRIu32, w[1] / SECTORS, w[1] % SECTORS, (uint32_t) w[0]);
  else
    snprintf (out, size, "unknown data (%016" PRIx64 " %016" PRIx64 ")",
              w[0], w[1]);
}

static void
print_history (const struct blk *b, FILE *fp)
{
  unsigned n = b->nhist < HISTORY ? b->nhist : HISTORY;

  fprintf (fp, "  last %u operations (oldest first):\n", n);
  for (unsigned k = 0; k < n; k++) {
    const struct blk_event *ev =
      &b->hist[(b->nhist - n + k) % HISTORY];

    fprintf (fp, "    #%" PRIu64 " %s%s", ev->seq, op_names[ev->type],
             ev->fua ? " fua" : "");
    if (ev->type == OP_WRITE)
      fprintf (fp, " version %" PRIu32, ev->version);
    if (ev->err)
      fprintf (fp, " failed: %s", strerror (ev->err));
    fputc ('\n', fp);
  }
}

static void
print_expected (const struct blk *b, FILE *fp)
{
  if (b->kind == BLK_UNKNOWN)
    fprintf (fp, "anything");
  else if (b->version == 0)
    fprintf (fp, "zeros");
  else
    fprintf (fp, "version %" PRIu32 "%s", b->version,
             b->may_zero ? " or zeros (trimmed since)" : "");
}

bool
model_check_block (const struct model *m, uint64_t block, const void *buf,
                   bool only_durable, FILE *fp)
{
  const struct blk *b = &m->blk[block];
  uint64_t want[WORDS_PER_SECTOR];
  const uint64_t *got = buf;
  char found[128];

  if (b->kind == BLK_UNKNOWN ||
      (only_durable && b->changed_seq > m->durable_seq))
    return true;
  for (unsigned s = 0; s < SECTORS; s++) {
    const uint64_t *g = got + s * WORDS_PER_SECTOR;

    if (b->version == 0) {
      if (is_zero (g, SECTOR_SIZE))
        continue;
    }
    else {
      sector_fill (want, block, s, b->version);
      if (memcmp (g, want, SECTOR_SIZE) == 0 ||
          (b->may_zero && is_zero (g, SECTOR_SIZE)))
        continue;
    }
    if (fp == NULL)
      return false;
    describe_sector (g, found, sizeof found);
    fprintf (fp, "MISMATCH: block %" PRIu64 " (offset %" PRIu64 ") sector %u:"
             " expected ", block, block * BLOCK_SIZE, s);
    print_expected (b, fp);
    fprintf (fp, ", found %s\n", found);
    print_history (b, fp);
    return false;
  }
  return true;
}

/* The saved form is the block array as it is in memory (the same
 * program reads it back, on the same machine), history included, so a
 * mismatch found after a restart still shows how the block got there.
 */
static const char model_magic[8] = "DCVMOD2";

int
model_save (const struct model *m, const char *path)
{
  FILE *fp = fopen (path, "w");
  uint64_t hdr[4] = { m->nblocks, m->seq, m->durable_seq, sizeof *m->blk };

  if (fp == NULL) {
    perror (path);
    return -1;
  }
  fwrite (model_magic, sizeof model_magic, 1, fp);
  fwrite (hdr, sizeof hdr, 1, fp);
  fwrite (m->blk, sizeof *m->blk, m->nblocks, fp);
  if (ferror (fp) | (fclose (fp) == EOF)) {
    fprintf (stderr, "%s: write error\n", path);
    return -1;
  }
  return 0;
}

int
model_load (struct model *m, const char *path)
{
  FILE *fp = fopen (path, "r");
  char magic[sizeof model_magic];
  uint64_t hdr[4];

  if (fp == NULL) {
    perror (path);
    return -1;
  }
  if (fread (magic, sizeof magic, 1, fp) != 1 ||
      memcmp (magic, model_magic, sizeof magic) != 0 ||
      fread (hdr, sizeof hdr, 1, fp) != 1 || hdr[3] != sizeof *m->blk ||
      model_init (m, hdr[0]) == -1) {
    fprintf (stderr, "%s: not a model saved by this program\n", path);
    fclose (fp);
    return -1;
  }
  m->seq = hdr[1];
  m->durable_seq = hdr[2];
  if (fread (m->blk, sizeof *m->blk, m->nblocks, fp) != m->nblocks) {
    fprintf (stderr, "%s: truncated\n", path);
    fclose (fp);
    model_free (m);
    return -1;
  }
  fclose (fp);
  for (uint64_t i = 0; i < m->nblocks; i++)
    m->blk[i].busy = false;
  return 0;
}
