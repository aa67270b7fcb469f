/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: libFuzzer target for thin mode's meta file loader
 * (volume/thin/thin-journal.c, thin-meta-v1.c, thin-map.c), on a buffer
 * as the volume reads it: the input as is, then with the checkpoint's
 * and every record's checksum fixed up (for the version the input
 * says) so that mutations reach the runs and the replay.  Whatever
 * recovers must map no physical slot twice, its free set must be
 * exactly the slots no run maps, its reserve must lie within the free
 * set, and the journal must end on a record boundary within the input.
 *
 * FUZZ_WRITE_SEEDS=DIR fuzz-thin writes the seeds of the current
 * version (valid meta files; "reserve" has a reserve and keep, map and
 * release records) to DIR and exits: that is how tests/fuzz/corpus-thin
 * was made.  Its version2-* seeds were written so by a build that wrote
 * version 2, its version 1 seed is tests/unit/thin-meta-v1.img (the
 * same identity: 32 logical slots of 64 KiB on 16 physical ones,
 * backend "mem").
 */
#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "file-header.h"
#include "le.h"
#include "thin-pure.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv);

#define CHECK(cond) do { if (!(cond)) { fprintf (stderr, "fuzz: %s\n", #cond); abort (); } } while (0)
#define NLOGICAL 32
#define NPHYS 16

static const struct thin_meta_id id = {
  .slot = 65536, .size = NLOGICAL * 65536, .backend_size = NPHYS * 65536,
  .backend = { .kind = "mem", .name = "mem" },
};

/* Every slot is either mapped by exactly one run or free. */
static void
check_map (const struct thin_map *m, const struct extmap *free_set)
{
  unsigned char owner[NPHYS] = { 0 };
  uint64_t mapped = 0, n;
  struct extent x;

  for (uint64_t l = 0; l < NLOGICAL; l += n) {
    uint32_t p;

    if (!thin_map_lookup (m, l, NLOGICAL - l, &p, &n))
      continue;
    for (uint64_t i = 0; i < n; i++) {
      CHECK (p + i < NPHYS && owner[p + i] == 0);
      owner[p + i] = 1;
    }
    mapped += n;
  }
  CHECK (mapped == m->mapped);
  for (uint64_t p = 0; extmap_find_from (free_set, p, &x); p = x.offset + x.length)
    for (uint64_t i = x.offset; i < x.offset + x.length; i++) {
      CHECK (i < NPHYS && owner[i] == 0);
      owner[i] = 2;
    }
  for (unsigned p = 0; p < NPHYS; p++)
    CHECK (owner[p] != 0);
}

/* The reserve holds free slots only: none is mapped (invariant 12). */
static void
check_reserve (const struct extmap *reserve, const struct extmap *free_set)
{
  struct extent r, f;

  for (uint64_t p = 0; extmap_find_from (reserve, p, &r);
       p = r.offset + r.length)
    CHECK (extmap_find_overlap (free_set, r.offset, r.length, &f) &&
           f.offset <= r.offset &&
           f.offset + f.length >= r.offset + r.length);
}

static void
recover (const uint8_t *data, size_t size)
{
  struct thin_recovery rec;
  struct thin_map m;
  char why[256];

  CHECK (thin_map_init (&m, NLOGICAL, NPHYS) == 0);
  if (thin_meta_recover (data, size, &id, &m, &rec, why, sizeof why) == 0) {
    size_t rsize = rec.version == 1 ? THIN_V1_RECORD_SIZE : THIN_RECORD_SIZE;

    CHECK (rec.valid_len <= size);
    CHECK (rec.valid_len >= rec.checkpoint_len);
    CHECK ((rec.valid_len - rec.checkpoint_len) % rsize == 0);
    check_map (&m, rec.free);
    check_reserve (rec.reserve, rec.free);
    thin_recovery_release (&rec);
  }
  else {
    CHECK (why[0] != '\0');
    CHECK (rec.free == NULL && rec.reserve == NULL);
  }
  thin_map_free (&m);
}

/* The checkpoint's CRC (over header, name and payload, the field as 0)
 * and each record's, recomputed for the version in the header.
 */
static void
fix_checksums (uint8_t *p, size_t size)
{
  bool v1 = size >= 12 && get32 (p + 8) == 1;
  size_t hsize = v1 ? THIN_V1_HEADER_SIZE : THIN_HEADER_SIZE;
  size_t crc_off = v1 ? 96 : 108, name_off = v1 ? 100 : 104;
  size_t pay_off = v1 ? 80 : 88;
  size_t rsize = v1 ? THIN_V1_RECORD_SIZE : THIN_RECORD_SIZE;
  uint64_t end, namelen, paylen;

  if (size < hsize)
    return;
  namelen = get32 (p + name_off);
  paylen = get64 (p + pay_off);
  if (namelen > size || paylen > size ||
      (end = hsize + namelen + paylen) > size)
    return;
  put32 (p + crc_off, file_frame_crc (p, end, crc_off));
  for (; end + rsize <= size; end += rsize)
    put32 (p + end + rsize - 4, crc32c (0, p + end, rsize - 4));
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
write_seed (const char *dir, const char *name, const struct thin_map *m,
            const struct extmap *reserve, const struct thin_record *recs,
            size_t nrecs)
{
  char path[4096];
  void *img;
  size_t len;
  FILE *fp;

  CHECK (thin_checkpoint_encode (&id, m->runs, reserve, 1, 0, &img, &len) == 0);
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
  struct thin_map empty, some;
  static const struct thin_record recs[] = {
    { THIN_REC_MAP, 2, 1, 10, 8 }, { THIN_REC_MAP, 1, 2, 12, 11 },
    { THIN_REC_UNMAP, 1, 3, 11, 9 }, { THIN_REC_MAP, 1, 4, 20, 9 },
    { THIN_REC_UNMAP, 3, 5, 1, 1 },
  };
  /* On "mapped" with physical 6 and 7 in the reserve: logical 2 and 3
   * unmapped into it, logical 10 mapped from it, physical 7 released.
   */
  static const struct thin_record reserve_recs[] = {
    { THIN_REC_KEEP, 2, 1, 2, 2 }, { THIN_REC_MAP, 1, 2, 10, 6 },
    { THIN_REC_RELEASE, 1, 3, 0, 7 },
  };
  struct extmap *reserve;

  if (dir == NULL)
    return 0;
  CHECK (thin_map_init (&empty, NLOGICAL, NPHYS) == 0);
  CHECK (thin_map_init (&some, NLOGICAL, NPHYS) == 0);
  CHECK (thin_map_add (&some, 0, 6, 0) == 0);
  CHECK (thin_map_add (&some, 30, 2, 14) == 0);
  reserve = extmap_new ();
  CHECK (reserve != NULL && extmap_insert (reserve, 6, 2, 0) == 0);
  write_seed (dir, "empty", &empty, NULL, NULL, 0);
  write_seed (dir, "mapped", &some, NULL, NULL, 0);
  write_seed (dir, "journal", &some, NULL, recs, sizeof recs / sizeof recs[0]);
  write_seed (dir, "reserve", &some, reserve, reserve_recs,
              sizeof reserve_recs / sizeof reserve_recs[0]);
  extmap_free (reserve);
  thin_map_free (&empty);
  thin_map_free (&some);
  exit (0);
}
