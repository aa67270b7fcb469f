/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: libFuzzer target for the format of the journal of the
 * pending set (cache/persist/journal.c), on a buffer as the engine reads the
 * file: the input as is, then with the header's and every record's
 * checksum fixed up so that mutations reach the record decoder.  Of an
 * image whose header is accepted:
 *  - the header re-encodes to its 64 bytes;
 *  - the replay's record count and the length it validated agree, and
 *    lie within the image;
 *  - each record handed over re-encodes to its bytes in the image and
 *    is numbered on from the header's first sequence number;
 *  - the image cut anywhere (at the valid length, a byte short of it,
 *    at a place the input's last two bytes choose) replays exactly the
 *    records whole before the cut: a torn tail ends the journal, never
 *    fails it;
 *  - a callback that stops at a record stops the replay there;
 *  - the records, applied to a pending map and a known-clean map as
 *    the engine's replay does (replay_one in cache/engine/engine-journal.c),
 *    leave both maps consistent (extmap_check).
 * Records made from the input's bytes are also encoded and replayed:
 * all of them must come back, which a decoder that refused valid
 * records would fail (the checks above alone would not notice).
 *
 * FUZZ_WRITE_SEEDS=DIR fuzz-journal writes the seed corpus (journals of
 * both maps and every operation, a torn one, a truncated one, one with
 * an older journal's records after its own) to DIR and exits: that is
 * how tests/fuzz/corpus-journal was made.
 */
#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "clean.h"
#include "crc32c.h"
#include "extmap.h"
#include "journal.h"
#include "le.h"
#include "reclog.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv);

/* The test suite's self-check of the extent map (extmap/extmap-check.c). */
extern const char *extmap_check (const struct extmap *map);

#define CHECK(cond) do { if (!(cond)) { fprintf (stderr, "fuzz: %s\n", #cond); abort (); } } while (0)
/* Where the header's CRC-32C sits (journal.h's layout). */
#define HEADER_CRC_OFFSET 56
/* A bound small enough that replays reach the known-clean map's. */
#define MAX_CLEAN_EXTENTS 64
/* Granularities beyond this are the engine's (mis)configuration, not
 * the journal's: the known-clean map gets 4 KiB instead.
 */
#define MAX_GRANULARITY (UINT64_C (1) << 30)
/* What the callback returns to stop a replay. */
#define STOPPED 42

struct replay {
  const unsigned char *image;
  size_t len;
  const struct journal_header *h;
  struct journal_record *recs; /* the records seen, up to cap */
  uint64_t n, cap;
  uint64_t stop_at;            /* return STOPPED at this record */
  struct extmap *pending;      /* when not NULL: the records applied */
  struct clean_map *clean;
};

/* As replay_one in cache/engine/engine-journal.c, without the engine: a decoded
 * record is one the map can take, so only memory could fail (none
 * fails here).
 */
static void
apply (struct replay *rp, const struct journal_record *r)
{
  if (r->map == JOURNAL_CLEAN) {
    if (r->op == EXTMAP_OBSERVE_INSERT)
      clean_discarded (rp->clean, r->offset, r->length);
    else if (r->op == EXTMAP_OBSERVE_REMOVE)
      clean_written (rp->clean, r->offset, r->length);
    else
      clean_forget_all (rp->clean, NULL, NULL);
    return;
  }
  switch (r->op) {
  case EXTMAP_OBSERVE_INSERT:
    CHECK (extmap_insert (rp->pending, r->offset, r->length, 0) == 0);
    break;
  case EXTMAP_OBSERVE_REMOVE:
    CHECK (extmap_remove (rp->pending, r->offset, r->length, NULL) == 0);
    break;
  default:
    CHECK (r->op == EXTMAP_OBSERVE_CLEAR && r->offset == 0 && r->length == 0);
    extmap_clear (rp->pending);
  }
}

static int
collect (const struct journal_record *r, void *opaque)
{
  struct replay *rp = opaque;
  size_t off = JOURNAL_HEADER_SIZE + rp->n * JOURNAL_RECORD_SIZE;
  unsigned char enc[JOURNAL_RECORD_SIZE];

  if (rp->n == rp->stop_at)
    return STOPPED;
  CHECK (rp->n < rp->cap && off + JOURNAL_RECORD_SIZE <= rp->len);
  CHECK (r->seq == rp->h->first_seq + rp->n);
  journal_record_encode (r, enc);
  CHECK (memcmp (enc, rp->image + off, sizeof enc) == 0);
  rp->recs[rp->n++] = *r;
  if (rp->pending)
    apply (rp, r);
  return 0;
}

static bool
same_record (const struct journal_record *a, const struct journal_record *b)
{
  return a->map == b->map && a->op == b->op && a->seq == b->seq &&
         a->offset == b->offset && a->length == b->length;
}

static bool
same_header (const struct journal_header *a, const struct journal_header *b)
{
  return a->checkpoint_len == b->checkpoint_len &&
         a->checkpoint_crc == b->checkpoint_crc &&
         a->first_seq == b->first_seq && a->granularity == b->granularity &&
         a->backend_size == b->backend_size;
}

/* Every clean extent is whole granules (clean.h), and both maps hold. */
static void
check_maps (const struct extmap *pending, const struct clean_map *clean)
{
  const char *err;
  struct extent x;

  err = extmap_check (pending);
  CHECK (err == NULL || (fprintf (stderr, "pending: %s\n", err), 0));
  err = extmap_check (clean->map);
  CHECK (err == NULL || (fprintf (stderr, "clean: %s\n", err), 0));
  CHECK (extmap_count (clean->map) <= MAX_CLEAN_EXTENTS);
  for (uint64_t p = 0; extmap_find_from (clean->map, p, &x);
       p = x.offset + x.length)
    CHECK (x.offset % clean->granularity == 0 &&
           x.length % clean->granularity == 0);
}

/* image[0, cut), in a buffer of its own so that a read past the cut is
 * an error, replays the first expected of the n records in recs.
 */
static void
replay_cut (const unsigned char *image, size_t cut,
            const struct journal_header *h,
            const struct journal_record *recs, uint64_t n, size_t valid)
{
  unsigned char *copy = malloc (cut + 1);
  struct journal_header hc;
  struct replay rp = { .stop_at = UINT64_MAX };
  uint64_t expected, count;
  size_t cvalid;
  char why[256];

  CHECK (copy != NULL);
  memcpy (copy, image, cut);
  if (cut < JOURNAL_HEADER_SIZE) {
    CHECK (journal_header_decode (copy, cut, &hc, why, sizeof why) == -1);
    free (copy);
    return;
  }
  CHECK (journal_header_decode (copy, cut, &hc, why, sizeof why) == 0);
  CHECK (same_header (&hc, h));
  expected = cut >= valid ? n : (cut - JOURNAL_HEADER_SIZE) / JOURNAL_RECORD_SIZE;
  rp = (struct replay) { .image = copy, .len = cut, .h = &hc,
                         .recs = malloc ((expected + 1) * sizeof *rp.recs),
                         .cap = expected + 1, .stop_at = UINT64_MAX };
  CHECK (rp.recs != NULL);
  CHECK (journal_replay (copy, cut, &hc, collect, &rp, &count, &cvalid) == 0);
  CHECK (count == expected && rp.n == expected);
  CHECK (cvalid == JOURNAL_HEADER_SIZE + expected * JOURNAL_RECORD_SIZE);
  for (uint64_t i = 0; i < expected; i++)
    CHECK (same_record (&rp.recs[i], &recs[i]));
  free (rp.recs);
  free (copy);
}

/* The n records of image, replayed again with a callback that stops at
 * record k: the replay returns its value, having applied the k before.
 */
static void
replay_stopped (const unsigned char *image, size_t len,
                const struct journal_header *h, uint64_t n, uint64_t k)
{
  struct replay rp = { .image = image, .len = len, .h = h,
                       .recs = malloc ((n + 1) * sizeof *rp.recs),
                       .cap = n + 1, .stop_at = k };
  uint64_t count;
  size_t valid;

  CHECK (rp.recs != NULL);
  CHECK (journal_replay (image, len, h, collect, &rp, &count, &valid) ==
         STOPPED);
  CHECK (count == k && rp.n == k);
  CHECK (valid == JOURNAL_HEADER_SIZE + k * JOURNAL_RECORD_SIZE);
  free (rp.recs);
}

/* Check image[0, len) as the module's contract says; hint chooses a
 * cut and a record to stop at.  Returns the number of records
 * replayed, or -1 if the header was refused.
 */
static int64_t
check_image (const unsigned char *image, size_t len, size_t hint)
{
  struct journal_header h;
  unsigned char enc[JOURNAL_HEADER_SIZE];
  struct clean_map clean;
  struct replay rp;
  uint64_t count, cap = len / JOURNAL_RECORD_SIZE + 1;
  size_t valid;
  char why[256] = "";

  if (journal_header_decode (image, len, &h, why, sizeof why) == -1) {
    CHECK (why[0] != '\0');
    return -1;
  }
  journal_header_encode (&h, enc);
  CHECK (memcmp (enc, image, sizeof enc) == 0);

  CHECK (clean_init (&clean, MAX_CLEAN_EXTENTS,
                     is_power_of_2 (h.granularity) &&
                     h.granularity <= MAX_GRANULARITY ? h.granularity : 4096)
         == 0);
  rp = (struct replay) { .image = image, .len = len, .h = &h,
                         .recs = malloc (cap * sizeof *rp.recs), .cap = cap,
                         .stop_at = UINT64_MAX, .pending = extmap_new (),
                         .clean = &clean };
  CHECK (rp.recs != NULL && rp.pending != NULL);
  CHECK (journal_replay (image, len, &h, collect, &rp, &count, &valid) == 0);
  CHECK (count == rp.n);
  CHECK (valid == JOURNAL_HEADER_SIZE + count * JOURNAL_RECORD_SIZE);
  CHECK (valid <= len);
  check_maps (rp.pending, &clean);
  extmap_free (rp.pending);
  clean_free (&clean);

  replay_cut (image, valid, &h, rp.recs, count, valid);
  if (valid > 0)
    replay_cut (image, valid - 1, &h, rp.recs, count, valid);
  replay_cut (image, hint % (len + 1), &h, rp.recs, count, valid);
  if (count > 0)
    replay_stopped (image, len, &h, count, hint % count);
  free (rp.recs);
  return count;
}

/* The header's checksum and each whole record's, recomputed. */
static void
fix_checksums (unsigned char *p, size_t len)
{
  if (len < JOURNAL_HEADER_SIZE)
    return;
  put32 (p + HEADER_CRC_OFFSET, crc32c (0, p, HEADER_CRC_OFFSET));
  for (size_t off = JOURNAL_HEADER_SIZE; len - off >= JOURNAL_RECORD_SIZE;
       off += JOURNAL_RECORD_SIZE)
    reclog_seal (p + off, JOURNAL_RECORD_SIZE,
                 get64 (p + off + RECLOG_SEQ_OFFSET));
}

/* A journal of the records in recs, then tail zero bytes (the file is
 * extended ahead of its records); the caller frees it.
 */
static unsigned char *
encode (const struct journal_header *h, const struct journal_record *recs,
        size_t n, size_t tail, size_t *len)
{
  unsigned char *image;

  *len = JOURNAL_HEADER_SIZE + n * JOURNAL_RECORD_SIZE + tail;
  image = calloc (1, *len);
  CHECK (image != NULL);
  journal_header_encode (h, image);
  for (size_t i = 0; i < n; i++)
    journal_record_encode (&recs[i],
                           image + JOURNAL_HEADER_SIZE + i * JOURNAL_RECORD_SIZE);
  return image;
}

/* Records from the input's bytes, four a record (map, op, offset and
 * length in units of 2^(data[0] % 55), so that ends stay within the
 * map's 2^63), numbered from the input's first eight bytes on (so the
 * numbers may wrap): encoded, they all replay.
 */
static void
round_trip (const uint8_t *data, size_t size, size_t hint)
{
  struct journal_header h = { .granularity = 4096, .backend_size = 1 << 30 };
  size_t n = size / 4, len;
  struct journal_record *recs = malloc ((n + 1) * sizeof *recs);
  uint64_t unit = size ? UINT64_C (1) << (data[0] % 55) : 1;
  unsigned char *image;

  CHECK (recs != NULL);
  h.first_seq = size >= 8 ? get64 (data) : 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *b = data + 4 * i;
    struct journal_record *r = &recs[i];

    r->map = b[0] & 1 ? JOURNAL_CLEAN : JOURNAL_PENDING;
    r->op = EXTMAP_OBSERVE_INSERT + b[1] % 3;
    r->seq = h.first_seq + i;
    r->offset = r->op == EXTMAP_OBSERVE_CLEAR ? 0 : b[2] * unit;
    r->length = r->op == EXTMAP_OBSERVE_CLEAR ? 0 : (b[3] + 1) * unit;
  }
  image = encode (&h, recs, n, size % 64, &len);
  CHECK (check_image (image, len, hint) == (int64_t) n);
  free (image);
  free (recs);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  unsigned char *copy = malloc (size + 1);
  size_t hint = size >= 2 ? data[size - 2] | (size_t) data[size - 1] << 8 : 0;

  CHECK (copy != NULL);
  check_image (data, size, hint);
  memcpy (copy, data, size);
  fix_checksums (copy, size);
  check_image (copy, size, hint);
  free (copy);
  round_trip (data, size, hint);
  return 0;
}

static void
write_seed (const char *dir, const char *name, const unsigned char *image,
            size_t len)
{
  char path[4096];
  FILE *fp;

  snprintf (path, sizeof path, "%s/%s", dir, name);
  fp = fopen (path, "wb");
  CHECK (fp != NULL && fwrite (image, 1, len, fp) == len && fclose (fp) == 0);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  enum { P = JOURNAL_PENDING, C = JOURNAL_CLEAN };
  enum { INS = EXTMAP_OBSERVE_INSERT, REM = EXTMAP_OBSERVE_REMOVE,
         CLR = EXTMAP_OBSERVE_CLEAR };
  /* Trims, a write that cancels part of one, a discard sent (its range
   * leaves pending and becomes clean), a write over clean granules,
   * forget-clean, a drain (clear).
   */
  static const struct journal_record both[] = {
    { P, INS, 1000, 0, 65536 }, { P, INS, 1001, 1 << 20, 8192 },
    { P, REM, 1002, 4096, 512 }, { P, REM, 1003, 0, 4096 },
    { C, INS, 1004, 0, 4096 }, { P, INS, 1005, 100, 3000 },
    { C, INS, 1006, 1 << 20, 8192 }, { C, REM, 1007, (1 << 20) + 10, 1 },
    { C, CLR, 1008, 0, 0 }, { P, CLR, 1009, 0, 0 },
    { P, INS, 1010, 8 << 20, 1 << 20 }, { C, INS, 1011, 16 << 20, 65536 },
  };
  static const struct journal_record pending[] = {
    { P, INS, 1, 4096, 4096 }, { P, INS, 2, 8192, 4096 },
    { P, REM, 3, 6000, 100 }, { P, CLR, 4, 0, 0 }, { P, INS, 5, 0, 512 },
  };
  /* An older journal's records, left behind a newer one's. */
  static const struct journal_record stale[] = {
    { P, INS, 1, 0, 4096 }, { C, INS, 2, 65536, 65536 },
    { P, INS, 77, 4096, 4096 }, { P, REM, 78, 0, 1 << 20 },
  };
  const size_t nboth = sizeof both / sizeof both[0];
  const char *dir = getenv ("FUZZ_WRITE_SEEDS");
  struct journal_header h = { .first_seq = 1, .granularity = 4096,
                              .backend_size = 64 << 20 };
  unsigned char *image;
  size_t len, end;

  if (dir == NULL)
    return 0;
  image = encode (&h, NULL, 0, 120, &len);
  write_seed (dir, "empty", image, len);
  free (image);
  image = encode (&h, pending, sizeof pending / sizeof pending[0], 80, &len);
  write_seed (dir, "pending", image, len);
  free (image);
  image = encode (&h, stale, sizeof stale / sizeof stale[0], 80, &len);
  write_seed (dir, "stale-tail", image, len);
  free (image);

  h = (struct journal_header) { .checkpoint_len = 4321,
                                .checkpoint_crc = 0xdeadbeef,
                                .first_seq = 1000, .granularity = 4096,
                                .backend_size = 64 << 20 };
  image = encode (&h, both, nboth, 80, &len);
  write_seed (dir, "both-maps", image, len);
  /* The last append torn: its checksum never reached the disk. */
  end = JOURNAL_HEADER_SIZE + nboth * JOURNAL_RECORD_SIZE;
  memset (image + end - 4, 0, 4);
  write_seed (dir, "torn", image, len);
  /* The file cut inside the last record. */
  write_seed (dir, "truncated", image, end - JOURNAL_RECORD_SIZE / 2);
  free (image);
  exit (0);
}
