/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: libFuzzer target for thin mode's meta file loader
 * (volume/thin/thin-journal.c, thin-map.c), on a buffer as the volume reads
 * it: the input as is, then with the checkpoint's and every record's
 * checksum fixed up so that mutations reach the map and the replay.
 * Whatever recovers must map no physical slot twice, and the journal
 * must end on a record boundary within the input.
 *
 * FUZZ_WRITE_SEEDS=DIR fuzz-thin writes the seed corpus (valid meta
 * files) to DIR and exits: that is how tests/fuzz/corpus-thin was made.
 */
#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "le.h"
#include "thin.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv);

#define CHECK(cond) do { if (!(cond)) { fprintf (stderr, "fuzz: %s\n", #cond); abort (); } } while (0)
#define NLOGICAL 64
#define NPHYS 32

static const struct thin_meta_id id = {
  .slot = 4096, .size = NLOGICAL * 4096, .backend_size = NPHYS * 4096,
  .backend = { .kind = "nbd", .name = "nbd+unix:///?socket=/fuzz" },
};

static void
recover (const uint8_t *data, size_t size)
{
  struct thin_recovery rec;
  struct thin_map m;
  char why[256];

  CHECK (thin_map_init (&m, NLOGICAL, NPHYS) == 0);
  if (thin_meta_recover (data, size, &id, &m, &rec, why, sizeof why) == 0) {
    bool seen[NPHYS] = { false };
    uint64_t mapped = 0;

    CHECK (rec.valid_len <= size);
    CHECK (rec.valid_len >= rec.checkpoint_len);
    CHECK ((rec.valid_len - rec.checkpoint_len) % THIN_RECORD_SIZE == 0);
    for (uint64_t l = 0; l < NLOGICAL; l++) {
      uint32_t p = m.l2p[l];

      if (p == THIN_UNMAPPED)
        continue;
      CHECK (p < NPHYS && !seen[p]);
      seen[p] = true;
      mapped++;
    }
    CHECK (mapped == m.mapped);
  }
  else
    CHECK (why[0] != '\0');
  thin_map_free (&m);
}

/* The checkpoint's CRC (offset 96, over header, name and payload with
 * the field as 0) and each record's, recomputed.
 */
static void
fix_checksums (uint8_t *p, size_t size)
{
  static const unsigned char zero[4];
  uint64_t end, namelen, paylen;
  uint32_t crc;

  if (size < THIN_HEADER_SIZE)
    return;
  namelen = get32 (p + 100);
  paylen = get64 (p + 80);
  if (namelen > size || paylen > size ||
      (end = THIN_HEADER_SIZE + namelen + paylen) > size)
    return;
  crc = crc32c (0, p, 96);
  crc = crc32c (crc, zero, 4);
  put32 (p + 96, crc32c (crc, p + 100, end - 100));
  for (; end + THIN_RECORD_SIZE <= size; end += THIN_RECORD_SIZE)
    put32 (p + end + 20, crc32c (0, p + end, 20));
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  uint8_t *copy = malloc (size + 1);

  CHECK (copy != NULL);
  recover (data, size);
  memcpy (copy, data, size);
  fix_checksums (copy, size);
  recover (copy, size);
  free (copy);
  return 0;
}

static void
write_seed (const char *dir, const char *name, const uint32_t *l2p,
            const struct thin_record *recs, size_t nrecs)
{
  char path[4096];
  void *img;
  size_t len;
  FILE *fp;

  CHECK (thin_checkpoint_encode (&id, l2p, NLOGICAL, 1, 8, 0, &img, &len) == 0);
  snprintf (path, sizeof path, "%s/%s", dir, name);
  fp = fopen (path, "w");
  CHECK (fp != NULL);
  CHECK (fwrite (img, 1, len, fp) == len);
  for (size_t i = 0; i < nrecs; i++) {
    unsigned char r[THIN_RECORD_SIZE];

    thin_record_encode (&recs[i], r);
    CHECK (fwrite (r, 1, sizeof r, fp) == sizeof r);
  }
  CHECK (fclose (fp) == 0);
  free (img);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  const char *dir = getenv ("FUZZ_WRITE_SEEDS");
  uint32_t empty[NLOGICAL], some[NLOGICAL];
  static const struct thin_record recs[] = {
    { THIN_REC_MAP, 8, 1, 10 }, { THIN_REC_MAP, 9, 2, 11 },
    { THIN_REC_UNMAP, 8, 3, 10 }, { THIN_REC_MAP, 8, 4, 40 },
    { THIN_REC_UNMAP, 3, 5, 3 },
  };

  if (dir == NULL)
    return 0;
  memset (empty, 0xff, sizeof empty);
  memcpy (some, empty, sizeof some);
  for (uint32_t l = 0; l < 8; l++)
    some[l] = l;
  write_seed (dir, "empty", empty, NULL, 0);
  write_seed (dir, "mapped", some, NULL, 0);
  write_seed (dir, "journal", some, recs, sizeof recs / sizeof recs[0]);
  exit (0);
}
