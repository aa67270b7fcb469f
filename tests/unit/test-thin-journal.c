/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of thin mode's meta file (thin-journal.c,
 * thin-meta.c, thin-meta-v1.c): records and checkpoints, commits that
 * follow the map, recovery of every prefix of a journal, crash images,
 * version 1 files converted, meta files that belong to something else,
 * and checkpoints taken while every kind of request runs.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "le.h"
#include "mem-backend.h"
#include "scratch.h"
#include "splitmix.h"
#include "thin-volume.h"
#include "thin-pure.h"
#include "thin-util.h"
#include "volume.h"

/* Records wait for the client's FLUSH, not for a fixed 256 KiB: past
 * it, a commit starts only once they pass a record (32 bytes) a mapped
 * run.  17,000 writes into separate 4 KiB slots buffer 531 KiB of
 * records in 17,000 runs: one commit (at 8,192 runs, where the two
 * bounds meet), where 256 KiB alone made two.  What waits is counted in
 * the volume's memory.
 */
static void
test_commit_follows_map (void **state)
{
  const unsigned writes = 17000;
  struct volume_stats st;

  vol = open_thin_on (mem_backend_new (2 * writes * 4 * KiB, 4 * KiB,
                                       1 << 30),
                      "4k", "136M");
  assert_non_null (vol);
  for (unsigned i = 0; i < writes; i++)
    fill ((uint64_t) 2 * i * 4 * KiB, 4 * KiB, 0x11);
  st = stats ();
  assert_int_equal (st.th.mapped_runs, writes);
  assert_int_equal (st.th.commits, 1);
  assert_true (st.th.memory_bytes >=
               st.th.map_bytes + (writes - 8192) * THIN_RECORD_SIZE);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (stats ().th.commits, 2);
}

/* A crash after writes into known-zero slots, before any commit: the
 * meta file is as it was when the map was created on a backend that
 * read zeros everywhere, but the slots now hold data, so none may be
 * taken for zero: a new slot is zero-filled around its write.
 */
static void
test_crash_zero_claims (void **state)
{
  struct mem_backend *m = mem_backend_new (DISK, 4 * KiB, 1 << 30);
  struct mem_backend *copy = mem_backend_new (DISK, 4 * KiB, 1 << 30);
  unsigned char *img;
  size_t len;

  mem_backend_enable_extents (m);
  mem_backend_enable_extents (copy);
  vol = open_thin_on (m, "64k", "2M");
  assert_non_null (vol);
  assert_int_equal (stats ().th.free_zero, NPHYS);
  img = read_file (meta, &len);
  for (int l = 0; l < NPHYS; l++)
    fill (l * SLOT, SLOT, 0x60 + l);
  /* "kill -9": the backend as written, the meta file never committed. */
  memcpy (copy->data, mem->data, DISK);
  reopen_after_crash (copy, img, len);
  assert_int_equal (stats ().th.mapped, 0);
  assert_int_equal (stats ().th.free_zero, 0);
  for (int l = 0; l < 4; l++) {
    fill ((30 - 2 * l) * SLOT + 100, 100, 0x01);
    assert_filled ((30 - 2 * l) * SLOT, 100, 0);
    assert_filled ((30 - 2 * l) * SLOT + 200, SLOT - 200, 0);
  }
  assert_int_equal (stats ().th.zero_fills, 4);
}

static void
test_record_codec (void **state)
{
  struct thin_record r = {
    .type = THIN_REC_UNMAP, .count = 77, .seq = 123456789012ULL,
    .logical = UINT64_C (1) << 40, .phys = 4242,
  }, d;
  unsigned char b[THIN_RECORD_SIZE];

  thin_record_encode (&r, b);
  assert_int_equal (thin_record_decode (b, &d), 0);
  assert_int_equal (d.type, r.type);
  assert_int_equal (d.count, r.count);
  assert_int_equal (d.seq, r.seq);
  assert_int_equal (d.logical, r.logical);
  assert_int_equal (d.phys, r.phys);
  for (int bit = 0; bit < THIN_RECORD_SIZE * 8; bit++) {
    b[bit / 8] ^= 1 << (bit % 8);
    assert_int_equal (thin_record_decode (b, &d), -1);
    b[bit / 8] ^= 1 << (bit % 8);
  }
}

static const struct thin_meta_id test_id = {
  .slot = SLOT, .size = 2 * DISK, .backend_size = DISK,
  .backend = { .kind = "mem", .name = "mem" },
};

/* A random map of runs: each physical slot used at most once. */
static void
random_map (struct thin_map *m, uint64_t *seed)
{
  uint32_t perm[NPHYS];
  bool used[NPHYS] = { false };

  for (uint32_t p = 0; p < NPHYS; p++)
    perm[p] = p;
  for (uint32_t p = NPHYS; p > 1; p--) {
    uint32_t k = splitmix_below (seed, p), t = perm[p - 1];

    perm[p - 1] = perm[k];
    perm[k] = t;
  }
  for (uint32_t i = 0; i < NPHYS; i++) {
    uint64_t l = splitmix_below (seed, 2 * NPHYS);
    uint32_t p = perm[i];

    if (used[p])
      continue;
    /* Sometimes a run of two on consecutive slots. */
    if (splitmix_below (seed, 3) == 0 && p + 1 < NPHYS && !used[p + 1] &&
        thin_map_add (m, l, 2, p) == 0) {
      used[p] = used[p + 1] = true;
      continue;
    }
    if (thin_map_add (m, l, 1, p) == 0)
      used[p] = true;
  }
}

/* The map, one entry per logical slot (UINT32_MAX: unmapped). */
static void
flatten (const struct thin_map *m, uint32_t *l2p, uint64_t nlogical)
{
  for (uint64_t l = 0; l < nlogical; ) {
    uint64_t n;
    uint32_t p;

    if (thin_map_lookup (m, l, nlogical - l, &p, &n))
      for (uint64_t i = 0; i < n; i++)
        l2p[l + i] = p + i;
    else
      for (uint64_t i = 0; i < n; i++)
        l2p[l + i] = UINT32_MAX;
    l += n;
  }
}

static void
test_checkpoint_roundtrip (void **state)
{
  uint64_t seed = 42;
  uint32_t a[2 * NPHYS], b[2 * NPHYS];
  struct thin_meta_id other = test_id;
  struct thin_recovery rec;
  struct thin_map m, r;
  char why[256];
  unsigned char *img;
  size_t len;

  for (int round = 0; round < 50; round++) {
    assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
    random_map (&m, &seed);
    assert_int_equal (thin_checkpoint_encode (&test_id, m.runs, NULL, 7, 1234,
                                              (void **) &img, &len), 0);
    assert_int_equal (thin_map_init (&r, 2 * NPHYS, NPHYS), 0);
    assert_int_equal (thin_meta_recover (img, len, &test_id, &r, &rec, why,
                                         sizeof why), 0);
    flatten (&m, a, 2 * NPHYS);
    flatten (&r, b, 2 * NPHYS);
    assert_memory_equal (a, b, sizeof a);
    assert_int_equal (thin_map_runs (&m), thin_map_runs (&r));
    assert_int_equal (rec.next_seq, 7);
    assert_int_equal (rec.checkpoint_time, 1234);
    assert_int_equal (rec.valid_len, len);
    assert_int_equal (rec.version, THIN_VERSION);
    assert_int_equal (extmap_bytes (rec.free), NPHYS - m.mapped);
    thin_recovery_release (&rec);
    thin_map_free (&r);
    /* Any damaged byte is refused. */
    for (size_t i = 0; i < len; i += 7) {
      img[i] ^= 0x10;
      assert_int_equal (thin_map_init (&r, 2 * NPHYS, NPHYS), 0);
      assert_int_equal (thin_meta_recover (img, len, &test_id, &r, &rec, why,
                                           sizeof why), -1);
      assert_null (rec.free);
      assert_null (rec.reserve);
      thin_map_free (&r);
      img[i] ^= 0x10;
    }
    thin_map_free (&m);
    free (img);
  }
  /* Another slot size, exported size or backend is refused. */
  assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
  assert_int_equal (thin_checkpoint_encode (&test_id, m.runs, NULL, 1, 0,
                                            (void **) &img, &len), 0);
  other.backend_size = DISK * 2;
  assert_int_equal (thin_meta_recover (img, len, &other, &m, &rec, why,
                                       sizeof why), -1);
  assert_non_null (strstr (why, "backend"));
  other = test_id;
  strcpy (other.backend.name, "mem2");
  assert_int_equal (thin_meta_recover (img, len, &other, &m, &rec, why,
                                       sizeof why), -1);
  /* A version this build does not know is refused, naming it. */
  put32 (img + 8, 7);
  assert_int_equal (thin_meta_recover (img, len, &test_id, &m, &rec, why,
                                       sizeof why), -1);
  assert_string_equal (why, "format version 7, this discardcache reads "
                       "versions 1 to 3");
  thin_map_free (&m);
  free (img);
}

/* Random writes (whole slots and runs of them) and trims with flushes
 * between, so the meta file holds a checkpoint and a journal.
 */
static void
churn (uint64_t *seed, int ops)
{
  static unsigned char buf[3 * SLOT];

  for (int i = 0; i < ops; i++) {
    uint64_t l = splitmix_below (seed, 2 * NPHYS - 2);
    unsigned r = splitmix_below (seed, 10), n = 1 + splitmix_below (seed, 3);

    if (r < 5) {
      memset (buf, (int) (l + 1), sizeof buf);
      volume_pwrite (vol, buf, n * SLOT, l * SLOT, false);
    }
    else if (r < 9)
      assert_int_equal (volume_trim (vol, l * SLOT, n * SLOT, false), 0);
    else
      assert_int_equal (volume_flush (vol), 0);
  }
  assert_int_equal (volume_flush (vol), 0);
}

static void
assert_no_slot_twice (const struct thin_map *m)
{
  unsigned char seen[NPHYS] = { 0 };
  uint32_t l2p[2 * NPHYS];

  flatten (m, l2p, m->nlogical);
  for (uint64_t l = 0; l < m->nlogical; l++)
    if (l2p[l] != UINT32_MAX) {
      assert_true (l2p[l] < NPHYS);
      assert_int_equal (seen[l2p[l]]++, 0);
    }
}

/* Recover an image into a fresh map; the result of thin_meta_recover. */
static int
recover (const unsigned char *img, size_t len, struct thin_map *m,
         struct thin_recovery *rec)
{
  char why[256];
  int r;

  assert_int_equal (thin_map_init (m, 2 * NPHYS, NPHYS), 0);
  r = thin_meta_recover (img, len, &test_id, m, rec, why, sizeof why);
  if (r == -1)
    assert_true (why[0] != '\0');
  else
    thin_recovery_release (rec);
  return r;
}

/* Cut the journal at every record boundary (the map must be exactly the
 * one the first k records give) and at random bytes, and damage random
 * bytes: recovery succeeds or refuses, and never maps a slot twice.
 */
static void
test_recover_prefixes (void **state)
{
  uint64_t seed = 7, nrec;
  uint32_t ref[2 * NPHYS], got[2 * NPHYS];
  struct thin_recovery rec;
  struct thin_map m;
  unsigned char *img;
  size_t len, base;

  open_thin ();
  churn (&seed, 400);
  img = read_file (meta, &len);
  assert_int_equal (recover (img, len, &m, &rec), 0);
  assert_int_equal (rec.valid_len, len);
  base = rec.checkpoint_len;
  nrec = (len - base) / THIN_RECORD_SIZE;
  assert_true (nrec > 100);
  assert_int_equal (rec.records, nrec);
  thin_map_free (&m);

  memset (ref, 0xff, sizeof ref);
  for (uint64_t k = 0; k <= nrec; k++) {
    assert_int_equal (recover (img, base + k * THIN_RECORD_SIZE, &m, &rec), 0);
    assert_int_equal (rec.records, k);
    flatten (&m, got, 2 * NPHYS);
    assert_memory_equal (got, ref, sizeof ref);
    assert_no_slot_twice (&m);
    thin_map_free (&m);
    if (k < nrec) {
      struct thin_record r;

      assert_int_equal (thin_record_decode (img + base + k * THIN_RECORD_SIZE,
                                            &r), 0);
      for (uint32_t i = 0; i < r.count; i++)
        ref[r.logical + i] = r.type == THIN_REC_MAP ? r.phys + i : UINT32_MAX;
    }
  }
  for (int i = 0; i < 2000; i++) {
    size_t cut = base + splitmix_below (&seed, len - base + 1);
    size_t at = splitmix_below (&seed, len);
    unsigned char saved = img[at];
    int r;

    if (i % 2)
      img[at] ^= 1 + splitmix_below (&seed, 255);
    r = recover (img, cut, &m, &rec);
    if (r == 0) {
      assert_true (rec.valid_len <= cut);
      assert_int_equal ((rec.valid_len - base) % THIN_RECORD_SIZE, 0);
      assert_no_slot_twice (&m);
    }
    /* A cut alone never refuses. */
    if (!(i % 2))
      assert_int_equal (r, 0);
    thin_map_free (&m);
    img[at] = saved;
  }
  free (img);
}

/* A crash image: the backend and the meta file as they were right after
 * a flush; writes and trims after it are lost.  What was flushed reads
 * back, and the map is the flushed one.
 */
static void
test_crash_image (void **state)
{
  struct mem_backend *copy = mem_backend_new (DISK, 4 * KiB, 1 << 30);
  unsigned char *img;
  size_t len;

  open_thin ();
  fill (0, SLOT, 0x01);
  fill (3 * SLOT + 512, 512, 0x03);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  fill (7 * SLOT, SLOT, 0x07);
  assert_int_equal (volume_flush (vol), 0);
  img = read_file (meta, &len);
  memcpy (copy->data, mem->data, DISK);
  /* Lost at the crash. */
  fill (9 * SLOT, SLOT, 0x09);
  assert_int_equal (volume_trim (vol, 7 * SLOT, SLOT, false), 0);
  reopen_after_crash (copy, img, len);
  assert_filled (0, SLOT, 0);
  assert_filled (3 * SLOT, 512, 0);
  assert_filled (3 * SLOT + 512, 512, 0x03);
  assert_filled (3 * SLOT + 1024, SLOT - 1024, 0);
  assert_filled (7 * SLOT, SLOT, 0x07);
  assert_filled (9 * SLOT, SLOT, 0);
  assert_int_equal (stats ().th.mapped, 2);
}

/* meta= of another slot size, exported size or backend is refused, and
 * the file is left alone; a torn tail is cut off.
 */
static void
test_meta_refused (void **state)
{
  unsigned char *img, *after;
  size_t len, len2;
  struct volume *e;

  open_thin ();
  fill (0, SLOT, 0x01);
  close_thin ();
  img = read_file (meta, &len);
  e = open_thin_on (NULL, "128k", "2M");
  assert_null (e);
  e = open_thin_on (NULL, "64k", "4M");
  assert_null (e);
  after = read_file (meta, &len2);
  assert_int_equal (len, len2);
  assert_memory_equal (img, after, len);
  free (after);
  /* A torn record at the end. */
  img = realloc (img, len + 10);
  memset (img + len, 0x5a, 10);
  write_file (meta, img, len + 10);
  vol = open_thin_on (NULL, "64k", "2M");
  assert_non_null (vol);
  free (read_file (meta, &len2));
  assert_int_equal (len2, len);
  free (img);
}

/* A version 1 meta file (tests/unit/thin-meta-v1.img, written by the
 * version 1 code: logical 0-3 on physical 5-8, 10 on 2 and 31 on 15 in
 * its checkpoint; then records mapping 12 to 0, unmapping 10, mapping
 * 13 to 2 and 14 to 9) is converted: the same map, now in a version 2
 * file.
 */
static void
test_meta_v1_converted (void **state)
{
  const char *srcdir = getenv ("abs_top_srcdir");
  struct mem_backend *m = mem_backend_new (DISK, 4 * KiB, 1 << 30);
  static const int64_t want[32] = {
    5, 6, 7, 8, -1, -1, -1, -1, -1, -1, -1, -1, 0, 2, 9, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 15,
  };
  char path[4096];
  unsigned char *img;
  size_t len;

  snprintf (path, sizeof path, "%s/tests/unit/thin-meta-v1.img",
            srcdir ? srcdir : "..");
  img = read_file (path, &len);
  write_file (meta, img, len);
  free (img);
  for (int l = 0; l < 32; l++)
    memset (m->data + (l % NPHYS) * SLOT, 0x80 + l % NPHYS, SLOT);
  vol = open_thin_on (m, "64k", "2M");
  assert_non_null (vol);
  for (int l = 0; l < 32; l++)
    assert_int_equal (phys_of (l), want[l]);
  assert_filled (14 * SLOT, SLOT, 0x89);
  assert_int_equal (stats ().th.mapped, 8);
  img = read_file (meta, &len);
  assert_int_equal (get32 (img + 8), THIN_VERSION);
  free (img);
  /* And it opens again as version 2. */
  close_thin ();
  vol = open_thin_on (m = mem_backend_new (DISK, 4 * KiB, 1 << 30),
                      "64k", "2M");
  assert_non_null (vol);
  assert_int_equal (phys_of (13), 2);
  assert_int_equal (stats ().th.mapped_runs, 5);
}

/* Writers, trimmers and flushers at once, with a journal so small that
 * nearly every commit writes a checkpoint while other threads append
 * records and set up slots.  Afterwards a copy of the backend and of
 * meta= taken after a final flush must give back exactly the same disk.
 */
struct worker {
  uint64_t seed;
  int ops;
};

static void *
work (void *opaque)
{
  struct worker *w = opaque;
  unsigned char buf[2 * SLOT];

  for (int i = 0; i < w->ops; i++) {
    uint64_t l = splitmix_below (&w->seed, 2 * NPHYS - 1);
    unsigned r = splitmix_below (&w->seed, 10);

    if (r < 5) {
      uint64_t off = splitmix_below (&w->seed, SLOT / 4096) * 4096;
      uint32_t n = r == 4 ? SLOT : 4096;

      memset (buf, (int) (l * 7 + i), n);
      volume_pwrite (vol, buf, n, l * SLOT + off, false);
    }
    else if (r < 8)
      volume_trim (vol, l * SLOT, (1 + r % 2) * SLOT, r == 7);
    else if (r < 9)
      volume_zero (vol, l * SLOT, SLOT, i % 2, false, false);
    else
      volume_flush (vol);
  }
  return NULL;
}

static void
test_checkpoint_concurrent (void **state)
{
  struct mem_backend *copy = mem_backend_new (DISK, 4 * KiB, 1 << 30);
  static unsigned char a[2 * DISK], b[2 * DISK];
  struct worker w[4];
  pthread_t th[4];
  unsigned char *img;
  size_t len;
  uint64_t checkpoints;

  open_thin ();
  thin_set_journal_limit (vol, 10 * THIN_RECORD_SIZE);
  for (int i = 0; i < 4; i++) {
    w[i] = (struct worker) { .seed = 100 + i, .ops = 600 };
    assert_int_equal (pthread_create (&th[i], NULL, work, &w[i]), 0);
  }
  /* Meanwhile the meta file, as a crash would leave it, always
   * recovers: a checkpoint holds the durable map only, never a change
   * whose record comes after it.
   */
  for (int i = 0; i < 200; i++) {
    struct thin_recovery rec;
    struct thin_map m;
    char why[256];

    img = read_file (meta, &len);
    assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
    if (thin_meta_recover (img, len, &test_id, &m, &rec, why,
                           sizeof why) == -1)
      fail_msg ("a meta file taken at run time does not recover: %s", why);
    thin_recovery_release (&rec);
    assert_no_slot_twice (&m);
    thin_map_free (&m);
    free (img);
    usleep (5000);
  }
  for (int i = 0; i < 4; i++)
    pthread_join (th[i], NULL);
  assert_int_equal (volume_flush (vol), 0);
  checkpoints = stats ().th.checkpoints;
  assert_true (checkpoints > 5);
  assert_int_equal (volume_pread (vol, a, 2 * DISK, 0), 0);
  img = read_file (meta, &len);
  memcpy (copy->data, mem->data, DISK);
  reopen_after_crash (copy, img, len);
  assert_int_equal (volume_pread (vol, b, 2 * DISK, 0), 0);
  assert_memory_equal (a, b, 2 * DISK);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) \
  cmocka_unit_test_setup_teardown (name, thin_setup, thin_teardown)
    T (test_commit_follows_map),
    T (test_crash_zero_claims),
    T (test_record_codec),
    T (test_checkpoint_roundtrip),
    T (test_recover_prefixes),
    T (test_crash_image),
    T (test_meta_refused),
    T (test_meta_v1_converted),
    T (test_checkpoint_concurrent),
#undef T
  };

  return cmocka_run_group_tests_name ("thin-journal", tests, NULL, NULL);
}
