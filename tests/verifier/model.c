/* SPDX-License-Identifier: BSD-3-Clause */
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

/* Add version v (not 0) to what s allows, unless it is there.  False
 * when version and alt[] are full.
 */
static bool
allow_version (struct blk_state *s, uint32_t v)
{
  unsigned i;

  if (s->version == 0) {
    s->version = v;
    return true;
  }
  if (s->version == v)
    return true;
  for (i = 0; i < ALT_VERSIONS && s->alt[i] && s->alt[i] != v; i++)
    ;
  if (i == ALT_VERSIONS)
    return false;
  s->alt[i] = v;
  return true;
}

/* A write of version failed: each sector now holds what it held, or
 * the write's data (it may have done part).
 */
static void
add_failed_write (struct blk_state *s, uint32_t version)
{
  if (s->kind != BLK_DATA)
    return;
  /* Zeros or the new data per sector is what a trim of it allows. */
  if (s->version == 0)
    s->may_zero = true;
  if (!allow_version (s, version) ||
      (s->before_trim && !allow_version (s, s->before_trim)))
    *s = (struct blk_state) { .kind = BLK_UNKNOWN };
}

/* The state after one operation on one block. */
static void
apply (struct blk_state *s, enum op_type type, uint32_t version, int err)
{
  switch (type) {
  case OP_WRITE:
  case OP_ZERO:
    if (err && type == OP_WRITE) {
      add_failed_write (s, version);
      return;
    }
    if (err) {                  /* a failed zero may have done part */
      if (s->kind == BLK_DATA && s->version != 0)
        s->may_zero = true;
      return;
    }
    *s = (struct blk_state) {
      .kind = BLK_DATA, .version = type == OP_WRITE ? version : 0,
    };
    return;
  case OP_TRIM:
    /* Failed or not, a trim may have reached the store. */
    if (s->kind == BLK_DATA && s->version != 0)
      s->may_zero = true;
    return;
  default:
    return;
  }
}

/* Everything the block went through is durable: its current state is. */
static void
make_durable (struct blk *b)
{
  b->dur = b->cur;
  b->nafter = 0;
  b->after_overflow = false;
}

/* The durable state as of durable_seq: the saved one with the changes
 * completed before durable_seq applied; *first_later is the index of the
 * first change after it.  False if the block lost track (too many
 * changes since its durable state).
 */
static bool
durable_state (const struct blk *b, uint64_t durable_seq, struct blk_state *d,
               unsigned *first_later)
{
  unsigned i = 0;

  if (b->changed_seq <= durable_seq) {
    *d = b->cur;
    *first_later = b->nafter;
    return true;
  }
  if (b->after_overflow)
    return false;
  *d = b->dur;
  for (; i < b->nafter && b->after[i].seq <= durable_seq; i++)
    apply (d, b->after[i].type, b->after[i].version, b->after[i].err);
  *first_later = i;
  return true;
}

/* Fold the changes that became durable into the durable state. */
static void
fold_durable (struct blk *b, uint64_t durable_seq)
{
  struct blk_state d;
  unsigned k;

  if (!durable_state (b, durable_seq, &d, &k))
    return;
  if (k == b->nafter) {
    make_durable (b);
    return;
  }
  b->dur = d;
  memmove (b->after, b->after + k, (b->nafter - k) * sizeof b->after[0]);
  b->nafter -= k;
}

/* Record a change for the crash check (before it enters the state). */
static void
note_change (struct model *m, struct blk *b, const struct blk_event *ev)
{
  fold_durable (b, m->durable_seq);
  if (ev->fua && !ev->err)
    return;                     /* the caller makes it durable */
  if (b->nafter == AFTER_DURABLE)
    b->after_overflow = true;
  else
    b->after[b->nafter++] = *ev;
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
      struct blk_state s = b->cur;
      struct blk_event ev = {
        .seq = seq, .version = v, .type = type, .fua = fua, .err = err,
      };

      note_change (m, b, &ev);
      apply (&s, type, v, err);
      if (type == OP_TRIM && !err && m->trim_zeroes)
        s = (struct blk_state) {
          .kind = BLK_DATA, .version = 0,
          .before_trim = b->cur.kind == BLK_DATA && b->cur.version
                         ? b->cur.version : b->cur.before_trim,
        };
      b->cur = s;
      b->changed_seq = seq;
      /* A completed FUA command is durable, and nothing before it on
       * this block can land after it.
       */
      if (fua && !err)
        make_durable (b);
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
model_all_durable (struct model *m)
{
  m->durable_seq = m->seq;
  for (uint64_t i = 0; i < m->nblocks; i++)
    make_durable (&m->blk[i]);
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

/* What a block may hold: some versions (0 = the zero block), and zeros
 * in any sector when zeros_ok.
 */
struct allowed {
  bool anything;
  bool zeros_ok;
  unsigned n;
  uint32_t version[1 + ALT_VERSIONS + AFTER_DURABLE + 2];
};

static void
allow_state (struct allowed *a, struct blk_state s)
{
  if (s.kind == BLK_UNKNOWN)
    a->anything = true;
  else if (s.version == 0)
    a->zeros_ok = true;
  else {
    a->version[a->n++] = s.version;
    a->zeros_ok |= s.may_zero;
    for (unsigned i = 0; i < ALT_VERSIONS && s.alt[i]; i++)
      a->version[a->n++] = s.alt[i];
  }
}

/* The same, read from the block's history, wherever the durable point
 * falls and whatever a check adopted since (a pending trim reads as
 * zeros, so a check may have adopted zeros over the old data): a write
 * or zero that failed after a trim may have cancelled it in the
 * journal's file without landing, so the last version written before
 * that trim is allowed after a crash (anything, when the history is too
 * short to name it).
 */
static void
allow_before_cancelled_trim (const struct blk *b, struct allowed *a)
{
  unsigned n = b->nhist < HISTORY ? b->nhist : HISTORY;
  bool failed = false, trimmed = false;

  for (unsigned k = n; k-- > 0;) {
    const struct blk_event *ev = &b->hist[(b->nhist - n + k) % HISTORY];

    if (!trimmed) {
      failed |= ev->err && (ev->type == OP_WRITE || ev->type == OP_ZERO);
      trimmed = failed && ev->type == OP_TRIM;
    }
    else if (ev->type == OP_WRITE && !ev->err) {
      a->version[a->n++] = ev->version;
      return;
    }
    else if (ev->type == OP_ZERO && !ev->err)
      return;                   /* zeros: allowed already */
  }
  if (trimmed && a->n == 0 && b->nhist > HISTORY)
    a->anything = true;
}

/* Now, or (after_crash) after a crash: the durable state or any change
 * since, each sector on its own (a write in flight may have landed in
 * part).
 */
static void
allowed_contents (const struct model *m, const struct blk *b, bool after_crash,
                  struct allowed *a)
{
  struct blk_state d;
  bool failed_write = false;
  unsigned k;

  *a = (struct allowed) { .n = 0 };
  if (!after_crash) {
    allow_state (a, b->cur);
    return;
  }
  if (!durable_state (b, m->durable_seq, &d, &k)) {
    a->anything = true;
    return;
  }
  allow_state (a, d);
  for (; k < b->nafter; k++) {
    const struct blk_event *ev = &b->after[k];

    if (ev->type == OP_WRITE)
      a->version[a->n++] = ev->version;
    else
      a->zeros_ok = true;       /* a zero, or a trim that may have run */
    failed_write |= ev->type == OP_WRITE && ev->err;
  }
  /* A failed write may have cancelled the durable trim (before_trim). */
  if (failed_write && d.kind == BLK_DATA && d.before_trim)
    a->version[a->n++] = d.before_trim;
  allow_before_cancelled_trim (b, a);
}

static bool
sector_allowed (const struct allowed *a, uint64_t block, unsigned s,
                const uint64_t *g)
{
  uint64_t want[WORDS_PER_SECTOR];

  if (is_zero (g, SECTOR_SIZE))
    return a->zeros_ok;
  for (unsigned i = 0; i < a->n; i++) {
    if ((uint32_t) g[0] != a->version[i])
      continue;
    sector_fill (want, block, s, a->version[i]);
    if (memcmp (g, want, SECTOR_SIZE) == 0)
      return true;
  }
  return false;
}

static void
print_expected (const struct allowed *a, FILE *fp)
{
  if (a->n == 0)
    fprintf (fp, "zeros");
  for (unsigned i = 0; i < a->n; i++)
    fprintf (fp, "%sversion %" PRIu32, i ? " or " : "", a->version[i]);
  if (a->n && a->zeros_ok)
    fprintf (fp, " or zeros (trimmed, or a zero or write failed, since)");
}

bool
model_check_block (const struct model *m, uint64_t block, const void *buf,
                   bool after_crash, FILE *fp)
{
  const struct blk *b = &m->blk[block];
  const uint64_t *got = buf;
  struct allowed a;
  char found[128];

  allowed_contents (m, b, after_crash, &a);
  if (a.anything)
    return true;
  for (unsigned s = 0; s < SECTORS; s++) {
    const uint64_t *g = got + s * WORDS_PER_SECTOR;

    if (sector_allowed (&a, block, s, g))
      continue;
    if (fp == NULL)
      return false;
    describe_sector (g, found, sizeof found);
    fprintf (fp, "MISMATCH: block %" PRIu64 " (offset %" PRIu64 ") sector %u:"
             " expected ", block, block * BLOCK_SIZE, s);
    print_expected (&a, fp);
    fprintf (fp, ", found %s%s\n", found,
             after_crash ? " (after a crash: the durable content or a later"
             " one)" : "");
    print_history (b, fp);
    return false;
  }
  return true;
}

/* The version of a sector that holds the pattern of this block and
 * sector, 0 for zeros, -1 for anything else.
 */
static int64_t
sector_version (uint64_t block, unsigned s, const uint64_t *g)
{
  uint64_t want[WORDS_PER_SECTOR];

  if (is_zero (g, SECTOR_SIZE))
    return 0;
  if (g[0] >> 32 != PATTERN_MAGIC || (uint32_t) g[0] == 0)
    return -1;
  sector_fill (want, block, s, (uint32_t) g[0]);
  return memcmp (g, want, SECTOR_SIZE) == 0 ? (int64_t) (uint32_t) g[0] : -1;
}

bool
model_checkable (const struct model *m, uint64_t block, bool after_crash)
{
  struct allowed a;

  allowed_contents (m, &m->blk[block], after_crash, &a);
  return !a.anything;
}

/* A block torn between versions (a write that landed in part) allows
 * each of them, and zeros if some sector held zeros: its 8 sectors
 * always fit in version and alt[], so allow_version cannot fail here.
 */
void
model_adopt_block (struct model *m, uint64_t block, const void *buf)
{
  struct blk *b = &m->blk[block];
  struct blk_state st = { .version = 0, .kind = BLK_DATA, .may_zero = false };
  const uint64_t *got = buf;
  bool zeros = false;

  for (unsigned s = 0; s < SECTORS; s++) {
    int64_t v = sector_version (block, s, got + s * WORDS_PER_SECTOR);

    if (v == 0)
      zeros = true;
    else if (v < 0) {
      st = (struct blk_state) { .kind = BLK_UNKNOWN }; /* no pattern of ours */
      break;
    }
    else
      allow_version (&st, (uint32_t) v);
  }
  st.may_zero = st.kind == BLK_DATA && st.version && zeros;
  b->cur = st;
  make_durable (b);
}

/* The saved form is the block array as it is in memory (the same
 * program reads it back, on the same machine), history included, so a
 * mismatch found after a restart still shows how the block got there.
 */
static const char model_magic[8] = "DCVMOD4";

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
