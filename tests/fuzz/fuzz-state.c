/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: libFuzzer target for the state file loader
 * (cache/persist/state.c), on a buffer as the engine reads it: the input as is,
 * then with its checksum fixed up so that mutations reach the payload
 * decoder.  Whatever passes validation must decode to exactly the
 * declared extents of both lists (pending, then known clean), each in
 * order, inside the backend.  The input also seeds an encode/decode
 * round trip.  Version 1 files (tests/fuzz/corpus-state/v1-*, written by
 * version 1's encoder) are in the corpus too.
 *
 * FUZZ_WRITE_SEEDS=DIR fuzz-state writes the seed corpus (valid files)
 * to DIR and exits: that is how tests/fuzz/corpus-state was made.
 */
#include <config.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv);

#define CHECK(cond) do { if (!(cond)) { fprintf (stderr, "fuzz: %s\n", #cond); abort (); } } while (0)
#define MAX_EXTENTS 4096

struct seen {
  const struct state_header *h;
  enum state_list list;
  uint64_t n[2];
  uint64_t prev_end;
  uint64_t bytes[2];
  uint64_t (*x)[2];             /* when not NULL: the extents, compared */
};

static int
visit (enum state_list list, uint64_t offset, uint64_t length, void *opaque)
{
  struct seen *s = opaque;
  uint64_t i = s->n[0] + s->n[1];

  CHECK (list == STATE_PENDING || list == STATE_CLEAN);
  CHECK (list >= s->list);
  if (list != s->list) {
    s->list = list;
    s->prev_end = 0;
  }
  CHECK (length > 0 && offset >= s->prev_end);
  CHECK (offset + length > offset && offset + length <= s->h->id.size);
  if (s->x) {
    CHECK (i < MAX_EXTENTS);
    CHECK (s->x[i][0] == offset && s->x[i][1] == length);
  }
  s->n[list]++;
  s->prev_end = offset + length;
  s->bytes[list] += length;
  return 0;
}

/* 0 if image decoded (and was checked), -1 if refused. */
static int
decode (const uint8_t *image, size_t len, uint64_t (*x)[2])
{
  struct state_header h;
  struct seen s = { .h = &h, .x = x };
  char why[512];

  if (state_read_header (image, len, &h, why, sizeof why) == -1)
    return -1;
  CHECK (state_check_identity (&h, &h.id, why, sizeof why) == 0);
  if (state_decode_extents (image, &h, NULL, NULL, why, sizeof why) == -1)
    return -1;
  CHECK (state_decode_extents (image, &h, visit, &s, why, sizeof why) == 0);
  CHECK (s.n[STATE_PENDING] == h.count && s.bytes[STATE_PENDING] == h.bytes);
  CHECK (s.n[STATE_CLEAN] == h.clean_count &&
         s.bytes[STATE_CLEAN] == h.clean_bytes);
  CHECK (h.version == 2 || h.clean_count == 0);
  return 0;
}

static void
fix_checksum (uint8_t *image, size_t len)
{
  uint32_t crc = state_checksum (image, len);

  for (int i = 0; i < 4; i++)
    image[104 + i] = crc >> (8 * i);
}

/* Extents from the input's bytes: (gap, length) pairs in units of
 * 2^(data[0] % 13), the first data[1] of them pending and the rest
 * known clean in units of 2^(data[0] % 5) times that, encoded, then
 * decoded back.
 */
static void
round_trip (const uint8_t *data, size_t size)
{
  static uint64_t x[MAX_EXTENTS][2];
  struct state_identity id = { .kind = "nbd", .granularity = 4096 };
  uint64_t unit = size ? UINT64_C (1) << (data[0] % 13) : 1;
  uint64_t clean_unit = size ? unit << (data[0] % 5) : 1, end = 0, max = 0;
  size_t pending = size > 1 ? data[1] : 0;
  struct state_encoder *enc = state_encoder_new (unit, clean_unit);
  void *image;
  size_t n = 0, len;

  CHECK (enc != NULL);
  snprintf (id.name, sizeof id.name, "nbd+unix:///?socket=/fuzz");
  for (size_t i = 2; i + 1 < size && n < MAX_EXTENTS; i += 2, n++) {
    enum state_list list = n < pending ? STATE_PENDING : STATE_CLEAN;
    uint64_t u = list == STATE_CLEAN ? clean_unit : unit;

    if (n == pending)
      end = 0;
    x[n][0] = end + data[i] * u;
    x[n][1] = (data[i + 1] + 1) * u;
    CHECK (state_encoder_add (enc, list, x[n][0], x[n][1]) == 0);
    end = x[n][0] + x[n][1];
    max = end > max ? end : max;
  }
  end = max;
  id.size = end + unit;
  CHECK (state_encoder_finish (enc, &id, &image, &len) == 0);
  CHECK (decode (image, len, x) == 0);
  free (image);
  /* The same extents declared for a backend they do not fit: refused. */
  if (n > 0) {
    id.size = end - 1;
    CHECK (state_encoder_finish (enc, &id, &image, &len) == 0);
    CHECK (decode (image, len, x) == -1);
    free (image);
  }
  state_encoder_free (enc);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  decode (data, size, NULL);
  if (size >= STATE_V1_HEADER_SIZE) {
    uint8_t *copy = malloc (size);

    CHECK (copy != NULL);
    memcpy (copy, data, size);
    fix_checksum (copy, size);
    decode (copy, size, NULL);
    free (copy);
  }
  if (size < 2 * MAX_EXTENTS)
    round_trip (data, size);
  return 0;
}

/* The seeds: small valid files of each backend kind, the first
 * npending extents pending and the rest known clean (in 4 KiB units).
 */
static void
write_seed (const char *dir, const char *name, const struct state_identity *id,
            uint64_t unit, const uint64_t (*x)[2], size_t n, size_t npending)
{
  struct state_encoder *enc = state_encoder_new (unit, 4096);
  char path[4096];
  void *image;
  size_t len;
  FILE *fp;

  CHECK (enc != NULL);
  for (size_t i = 0; i < n; i++)
    CHECK (state_encoder_add (enc, i < npending ? STATE_PENDING : STATE_CLEAN,
                              x[i][0], x[i][1]) == 0);
  CHECK (state_encoder_finish (enc, id, &image, &len) == 0);
  state_encoder_free (enc);
  snprintf (path, sizeof path, "%s/%s", dir, name);
  fp = fopen (path, "wb");
  CHECK (fp != NULL && fwrite (image, 1, len, fp) == len && fclose (fp) == 0);
  free (image);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  static const uint64_t aligned[][2] = {
    { 0, 65536 }, { 131072, 4096 }, { 1 << 20, 1 << 20 },
  };
  static const uint64_t ragged[][2] = {
    { 100, 3000 }, { 4096, 512 }, { 9000, 1 }, { 16384, 65536 + 7 },
  };
  /* Pending, then known clean from 0 again. */
  static const uint64_t both[][2] = {
    { 4096, 512 }, { 65536 + 100, 8192 },
    { 0, 65536 }, { 1 << 20, 4096 }, { 8 << 20, 1 << 20 },
  };
  const char *dir = getenv ("FUZZ_WRITE_SEEDS");
  struct state_identity file = { .kind = "file", .dev = 0x801, .ino = 12345,
                                 .size = 64 << 20, .granularity = 4096,
                                 .mtime_ns = 1700000000123456789,
                                 .name = "/srv/disk.img" };
  struct state_identity dev = { .kind = "blkdev", .dev = 0x810, .size = 1 << 30,
                                .granularity = 4096, .name = "/dev/sdb" };
  struct state_identity nbd = { .kind = "nbd", .size = 64 << 20,
                                .granularity = 512,
                                .name = "nbd+unix:///?socket=/run/dev.sock" };

  if (dir == NULL)
    return 0;
  write_seed (dir, "file-aligned", &file, 4096, aligned, 3, 3);
  write_seed (dir, "blkdev-aligned", &dev, 4096, aligned, 3, 3);
  write_seed (dir, "nbd-ragged", &nbd, 1, ragged, 4, 4);
  write_seed (dir, "nbd-empty", &nbd, 1, NULL, 0, 0);
  write_seed (dir, "file-pending-and-clean", &file, 4, both, 5, 2);
  write_seed (dir, "blkdev-clean-only", &dev, 4096, aligned, 3, 0);
  exit (0);
}
