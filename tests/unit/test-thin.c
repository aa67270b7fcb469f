/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of thin mode: the allocator (LIFO reuse,
 * nothing reused before its unmap is durable), ENOSPC, sub-slot zeros,
 * the journal's records and checkpoint, recovery of every prefix of a
 * journal, a crash image, and meta files that belong to something else.
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
#include "mem-backend.h"
#include "scratch.h"
#include "splitmix.h"
#include "thin-volume.h"
#include "thin.h"
#include "volume.h"

#define KiB 1024
#define SLOT (64 * KiB)
#define NPHYS 16
#define DISK (NPHYS * SLOT)

static char dir[256];
static char meta[300];
static struct mem_backend *mem;
static struct volume *vol;             /* the thin volume under test */
static struct engine *eng;             /* below it */

static int
setup (void **state)
{
  scratch_make (dir, sizeof dir, "test-thin");
  snprintf (meta, sizeof meta, "%s/meta", dir);
  return 0;
}

/* The thin volume, then the engine below it. */
static void
close_thin (void)
{
  volume_close (vol);
  vol = NULL;
  engine_close (eng);
  eng = NULL;
}

static int
teardown (void **state)
{
  close_thin ();
  scratch_remove (dir);
  return 0;
}

/* A thin volume over an engine over backend m (a new one if NULL),
 * exported size twice the backend's, with a delay that keeps discards
 * pending.  Sets eng; NULL (and eng NULL) when the volume is refused.
 */
static struct volume *
open_thin_on (struct mem_backend *m, const char *slot, const char *size)
{
  struct engine_config ecfg;
  struct volume_config vcfg;
  struct volume *v;

  engine_config_init (&ecfg);
  ecfg.delay_ms = 3600 * 1000;
  volume_config_init (&vcfg);
  assert_int_equal (volume_config_set (&vcfg, "thin", "on"), 0);
  assert_int_equal (volume_config_set (&vcfg, "slot", slot), 0);
  assert_int_equal (volume_config_set (&vcfg, "size", size), 0);
  assert_int_equal (volume_config_set (&vcfg, "meta", meta), 0);
  mem = m ? m : mem_backend_new (DISK, 4 * KiB, 1 << 30);
  eng = engine_open (&ecfg, &mem->b);
  assert_non_null (eng);
  v = volume_open (eng, &vcfg);
  if (v == NULL) {
    engine_close (eng);
    eng = NULL;
  }
  engine_config_free (&ecfg);
  volume_config_free (&vcfg);
  return v;
}

static void
open_thin (void)
{
  vol = open_thin_on (NULL, "64k", "2M");
  assert_non_null (vol);
}

static struct volume_stats
stats (void)
{
  struct volume_stats st;

  volume_get_stats (vol, &st);
  return st;
}

static void
fill (uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[2 * DISK];

  memset (buf, byte, length);
  assert_int_equal (volume_pwrite (vol, buf, length, offset, false), 0);
}

static void
assert_filled (uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[2 * DISK];

  assert_int_equal (volume_pread (vol, buf, length, offset), 0);
  for (uint32_t i = 0; i < length; i++)
    if (buf[i] != byte)
      fail_msg ("byte %u at offset %llu: %#x, expected %#x", i,
                (unsigned long long) offset + i, buf[i], byte);
}

/* The physical slot logical slot l maps to, or -1. */
static int64_t
phys_of (uint64_t l)
{
  uint64_t lg, ph;

  if (volume_dump_map_batch (vol, l, &lg, &ph, 1) <= 0 || lg != l)
    return -1;
  return ph;
}

/* The allocator alone: clean slots in order, then freed ones last
 * freed first, and none before the commit that makes its unmap durable
 * (nor while its discard is still being recorded).
 */
static void
test_map_lifo (void **state)
{
  struct thin_map m;
  bool reused;

  assert_int_equal (thin_map_init (&m, 8, 4), 0);
  for (uint32_t l = 0; l < 4; l++) {
    assert_int_equal (thin_map_alloc (&m, l, &reused), l);
    assert_false (reused);
    thin_map_mapped (&m, l);
  }
  assert_int_equal (thin_map_alloc (&m, 4, &reused), THIN_UNMAPPED);
  for (int i = 0; i < 3; i++)
    assert_int_equal (thin_map_reserve_unmap (&m), 0);
  assert_int_equal (thin_map_unmap (&m, 1, 1), 1);
  assert_int_equal (thin_map_unmap (&m, 3, 2), 3);
  assert_int_equal (thin_map_unmap (&m, 2, 3), 2);
  assert_int_equal (thin_map_pending_free (&m), 3);
  /* Not durable yet. */
  assert_int_equal (thin_map_alloc (&m, 4, &reused), THIN_UNMAPPED);
  thin_map_unmapped (&m, 1);
  thin_map_unmapped (&m, 3);
  /* Slot 2's discard is not recorded: its record is durable, it stays. */
  assert_int_equal (thin_map_commit (&m, 3), 2);
  assert_int_equal (thin_map_alloc (&m, 4, &reused), 3);
  assert_true (reused);
  assert_int_equal (thin_map_alloc (&m, 5, &reused), 1);
  assert_int_equal (thin_map_alloc (&m, 6, &reused), THIN_UNMAPPED);
  thin_map_unmapped (&m, 2);
  assert_int_equal (thin_map_commit (&m, 3), 1);
  assert_int_equal (thin_map_alloc (&m, 6, &reused), 2);
  assert_int_equal (m.mapped, 4);
  /* A failed first write gives the slot back at once. */
  thin_map_abort (&m, 2);
  assert_int_equal (m.l2p[6], THIN_UNMAPPED);
  assert_int_equal (thin_map_alloc (&m, 7, &reused), 2);
  thin_map_free (&m);
}

/* Through the engine: the slot freed last (discard still pending) is
 * the one the next new slot gets, and its discard is never sent.
 */
static void
test_engine_reuse (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];
  int64_t p1, p2;
  unsigned n;

  open_thin ();
  for (int l = 0; l < 4; l++)
    fill (l * SLOT, SLOT, 0x10 + l);
  assert_int_equal (volume_flush (vol), 0);
  p1 = phys_of (1);
  p2 = phys_of (2);
  assert_true (p1 >= 0 && p2 >= 0);
  assert_int_equal (volume_trim (vol, 1 * SLOT, SLOT, false), 0);
  assert_int_equal (volume_trim (vol, 2 * SLOT, SLOT, false), 0);
  assert_int_equal (stats ().th.free_undurable, 2);
  /* Before the commit, a new slot is a clean one. */
  fill (20 * SLOT, SLOT, 0x20);
  assert_true (phys_of (20) != p1 && phys_of (20) != p2);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (stats ().th.free_pending, 2);
  fill (21 * SLOT, SLOT, 0x21);
  assert_int_equal (phys_of (21), p2);
  fill (22 * SLOT, 4 * KiB, 0x22);
  assert_int_equal (phys_of (22), p1);
  assert_int_equal (stats ().th.reused, 2);
  /* Both pending discards cancelled whole: by the data and the zeros
   * around it.
   */
  assert_int_equal (stats ().engine.cancelled_by_writes +
                    stats ().engine.cancelled_by_zeroes, 2 * SLOT);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  n = mem_backend_calls (mem, c, MEM_MAX_CALLS);
  assert_int_equal (n, 0);
  assert_filled (0, SLOT, 0x10);
  assert_filled (1 * SLOT, 2 * SLOT, 0);
  assert_filled (3 * SLOT, SLOT, 0x13);
  assert_filled (21 * SLOT, SLOT, 0x21);
}

/* A full pool fails the write needing a new slot, only that one; a trim
 * makes room (the write commits the unmap itself).
 */
static void
test_enospc (void **state)
{
  open_thin ();
  for (int l = 0; l < NPHYS; l++)
    fill (l * 2 * SLOT, SLOT, 0x40 + l);
  errno = 0;
  assert_int_equal (volume_pwrite (vol, "x", 1, 1 * SLOT, false), -1);
  assert_int_equal (errno, ENOSPC);
  assert_int_equal (stats ().th.enospc, 1);
  /* Writes to mapped slots go on; nothing else changed. */
  fill (2 * SLOT + 100, 100, 0x77);
  assert_filled (2 * SLOT + 100, 100, 0x77);
  assert_filled (1 * SLOT, SLOT, 0);
  for (int l = 2; l < NPHYS; l++)
    assert_filled (l * 2 * SLOT + 4096, 4096, 0x40 + l);
  assert_int_equal (stats ().th.free_clean + stats ().th.free_pending, 0);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  fill (1 * SLOT, 512, 0x55);
  assert_filled (1 * SLOT, 512, 0x55);
  assert_filled (1 * SLOT + 512, SLOT - 512, 0);
  assert_filled (0, SLOT, 0);
  assert_int_equal (stats ().th.reused, 1);
}

/* A new slot reads as zeros around its first write, even when the slot
 * still holds its previous owner's data (discard pending, not sent).
 */
static void
test_subslot_zeros (void **state)
{
  int64_t p;

  open_thin ();
  fill (0, SLOT, 0xaa);
  assert_int_equal (volume_flush (vol), 0);
  p = phys_of (0);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (mem->data[p * SLOT + 5000], 0xaa);
  fill (5 * SLOT + 1000, 100, 0xbb);
  assert_int_equal (phys_of (5), p);
  assert_filled (5 * SLOT, 1000, 0);
  assert_filled (5 * SLOT + 1000, 100, 0xbb);
  assert_filled (5 * SLOT + 1100, SLOT - 1100, 0);
  for (uint64_t i = 0; i < SLOT; i++)
    assert_true (mem->data[p * SLOT + i] != 0xaa);
  /* A zero of a whole slot unmaps it; of a part, writes zeros. */
  fill (6 * SLOT, SLOT, 0xcc);
  assert_int_equal (volume_zero (vol, 6 * SLOT + 10, 10, false, false, false), 0);
  assert_filled (6 * SLOT + 10, 10, 0);
  assert_filled (6 * SLOT + 20, 100, 0xcc);
  assert_int_equal (volume_zero (vol, 5 * SLOT, 2 * SLOT, false, false, false), 0);
  assert_int_equal (phys_of (5), -1);
  assert_int_equal (phys_of (6), -1);
  assert_filled (5 * SLOT, 2 * SLOT, 0);
}

/* An exported size that is not a multiple of the slot: the last, short
 * slot is written, read and unmapped like the others.
 */
static void
test_short_last_slot (void **state)
{
  uint64_t size = 2 * DISK - SLOT / 2, last = (2 * DISK - SLOT) / SLOT;
  char sz[32];

  snprintf (sz, sizeof sz, "%" PRIu64, size);
  vol = open_thin_on (NULL, "64k", sz);
  assert_non_null (vol);
  assert_int_equal (volume_size (vol), size);
  fill (last * SLOT + 100, SLOT / 2 - 100, 0x31);
  assert_filled (last * SLOT, 100, 0);
  assert_filled (last * SLOT + 100, SLOT / 2 - 100, 0x31);
  assert_true (phys_of (last) >= 0);
  assert_int_equal (volume_trim (vol, last * SLOT, SLOT / 2, false), 0);
  assert_int_equal (phys_of (last), -1);
  errno = 0;
  assert_int_equal (volume_pwrite (vol, "x", 1, size, false), -1);
  assert_int_equal (errno, EINVAL);
}

static void
test_record_codec (void **state)
{
  struct thin_record r = { THIN_REC_UNMAP, 77, 123456789012ULL, 4242 }, d;
  unsigned char b[THIN_RECORD_SIZE];

  thin_record_encode (&r, b);
  assert_int_equal (thin_record_decode (b, &d), 0);
  assert_int_equal (d.type, r.type);
  assert_int_equal (d.phys, r.phys);
  assert_int_equal (d.seq, r.seq);
  assert_int_equal (d.logical, r.logical);
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

/* A random map: each physical slot used at most once. */
static void
random_map (uint32_t *l2p, uint64_t nlogical, uint32_t nphys, uint64_t *seed)
{
  uint32_t perm[NPHYS];

  for (uint32_t p = 0; p < nphys; p++)
    perm[p] = p;
  for (uint32_t p = nphys; p > 1; p--) {
    uint32_t k = splitmix_below (seed, p), t = perm[p - 1];

    perm[p - 1] = perm[k];
    perm[k] = t;
  }
  memset (l2p, 0xff, nlogical * sizeof *l2p);
  for (uint32_t p = 0; p < nphys; p++)
    if (splitmix_below (seed, 3))
      l2p[splitmix_below (seed, nlogical)] = perm[p];
}

static void
test_checkpoint_roundtrip (void **state)
{
  uint64_t seed = 42;
  uint32_t l2p[2 * NPHYS];
  struct thin_meta_id other = test_id;
  struct thin_recovery rec;
  struct thin_map m;
  char why[256];
  unsigned char *img;
  size_t len;

  for (int round = 0; round < 50; round++) {
    random_map (l2p, 2 * NPHYS, NPHYS, &seed);
    assert_int_equal (thin_checkpoint_encode (&test_id, l2p, 2 * NPHYS, 7, 9,
                                              1234, (void **) &img, &len), 0);
    assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
    assert_int_equal (thin_meta_recover (img, len, &test_id, &m, &rec, why,
                                         sizeof why), 0);
    assert_memory_equal (m.l2p, l2p, sizeof l2p);
    assert_int_equal (rec.next_seq, 7);
    assert_int_equal (rec.checkpoint_time, 1234);
    assert_int_equal (rec.valid_len, len);
    assert_int_equal (m.next_clean, 9);
    thin_map_free (&m);
    /* Any damaged byte is refused. */
    for (size_t i = 0; i < len; i += 7) {
      img[i] ^= 0x10;
      assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
      assert_int_equal (thin_meta_recover (img, len, &test_id, &m, &rec, why,
                                           sizeof why), -1);
      thin_map_free (&m);
      img[i] ^= 0x10;
    }
    free (img);
  }
  /* Another slot size, exported size or backend is refused. */
  assert_int_equal (thin_checkpoint_encode (&test_id, l2p, 2 * NPHYS, 1, 0, 0,
                                            (void **) &img, &len), 0);
  other.backend_size = DISK * 2;
  assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
  assert_int_equal (thin_meta_recover (img, len, &other, &m, &rec, why,
                                       sizeof why), -1);
  assert_non_null (strstr (why, "backend"));
  other = test_id;
  strcpy (other.backend.name, "mem2");
  assert_int_equal (thin_meta_recover (img, len, &other, &m, &rec, why,
                                       sizeof why), -1);
  thin_map_free (&m);
  free (img);
}

static unsigned char *
read_file (const char *path, size_t *len)
{
  struct stat st;
  unsigned char *p;
  int fd = open (path, O_RDONLY);

  assert_true (fd >= 0);
  assert_int_equal (fstat (fd, &st), 0);
  p = malloc (st.st_size + 1);
  assert_non_null (p);
  assert_int_equal (read (fd, p, st.st_size), st.st_size);
  close (fd);
  *len = st.st_size;
  return p;
}

static void
write_file (const char *path, const void *p, size_t len)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  assert_true (fd >= 0);
  assert_int_equal (write (fd, p, len), (ssize_t) len);
  close (fd);
}

/* Random whole-slot writes and trims with flushes between, so the
 * meta file holds a checkpoint and a journal.
 */
static void
churn (uint64_t *seed, int ops)
{
  for (int i = 0; i < ops; i++) {
    uint64_t l = splitmix_below (seed, 2 * NPHYS);
    unsigned r = splitmix_below (seed, 10);

    if (r < 5) {
      static unsigned char buf[SLOT];

      memset (buf, (int) (l + 1), sizeof buf);
      volume_pwrite (vol, buf, SLOT, l * SLOT, false);
    }
    else if (r < 9)
      assert_int_equal (volume_trim (vol, l * SLOT, SLOT, false), 0);
    else
      assert_int_equal (volume_flush (vol), 0);
  }
  assert_int_equal (volume_flush (vol), 0);
}

static void
assert_no_slot_twice (const struct thin_map *m)
{
  unsigned char seen[NPHYS] = { 0 };

  for (uint64_t l = 0; l < m->nlogical; l++)
    if (m->l2p[l] != THIN_UNMAPPED) {
      assert_true (m->l2p[l] < NPHYS);
      assert_int_equal (seen[m->l2p[l]]++, 0);
    }
}

/* Cut the journal at every record boundary (the map must be exactly the
 * one the first k records give) and at random bytes, and damage random
 * bytes: recovery succeeds or refuses, and never maps a slot twice.
 */
static void
test_recover_prefixes (void **state)
{
  uint64_t seed = 7, nrec;
  uint32_t ref[2 * NPHYS];
  struct thin_recovery rec;
  struct thin_map m;
  unsigned char *img;
  size_t len, base;
  char why[256];

  open_thin ();
  churn (&seed, 400);
  img = read_file (meta, &len);
  assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
  assert_int_equal (thin_meta_recover (img, len, &test_id, &m, &rec, why,
                                       sizeof why), 0);
  assert_int_equal (rec.valid_len, len);
  base = rec.checkpoint_len;
  nrec = (len - base) / THIN_RECORD_SIZE;
  assert_true (nrec > 100);
  assert_int_equal (rec.records, nrec);
  thin_map_free (&m);

  memset (ref, 0xff, sizeof ref);
  for (uint64_t k = 0; k <= nrec; k++) {
    assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
    assert_int_equal (thin_meta_recover (img, base + k * THIN_RECORD_SIZE,
                                         &test_id, &m, &rec, why,
                                         sizeof why), 0);
    assert_int_equal (rec.records, k);
    assert_memory_equal (m.l2p, ref, sizeof ref);
    assert_no_slot_twice (&m);
    thin_map_free (&m);
    if (k < nrec) {
      struct thin_record r;

      assert_int_equal (thin_record_decode (img + base + k * THIN_RECORD_SIZE,
                                            &r), 0);
      ref[r.logical] = r.type == THIN_REC_MAP ? r.phys : THIN_UNMAPPED;
    }
  }
  for (int i = 0; i < 2000; i++) {
    size_t cut = base + splitmix_below (&seed, len - base + 1);
    size_t at = splitmix_below (&seed, len);
    unsigned char saved = img[at];
    int r;

    if (i % 2)
      img[at] ^= 1 + splitmix_below (&seed, 255);
    assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
    r = thin_meta_recover (img, cut, &test_id, &m, &rec, why, sizeof why);
    if (r == 0) {
      assert_true (rec.valid_len <= cut);
      assert_int_equal ((rec.valid_len - base) % THIN_RECORD_SIZE, 0);
      assert_no_slot_twice (&m);
    }
    else
      assert_true (why[0] != '\0');
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
  close_thin ();

  write_file (meta, img, len);
  free (img);
  vol = open_thin_on (copy, "64k", "2M");
  assert_non_null (vol);
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
  static unsigned char zero[SLOT];
  unsigned char buf[4096];

  for (int i = 0; i < w->ops; i++) {
    uint64_t l = splitmix_below (&w->seed, 2 * NPHYS);
    unsigned r = splitmix_below (&w->seed, 10);

    if (r < 5) {
      uint64_t off = splitmix_below (&w->seed, SLOT / 4096) * 4096;

      memset (buf, (int) (l * 7 + i), sizeof buf);
      volume_pwrite (vol, buf, sizeof buf, l * SLOT + off, false);
    }
    else if (r < 8)
      volume_trim (vol, l * SLOT, SLOT, r == 7);
    else if (r < 9)
      volume_zero (vol, l * SLOT, SLOT, false, false, false);
    else
      volume_flush (vol);
  }
  (void) zero;
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
  close_thin ();

  write_file (meta, img, len);
  free (img);
  vol = open_thin_on (copy, "64k", "2M");
  assert_non_null (vol);
  assert_int_equal (volume_pread (vol, b, 2 * DISK, 0), 0);
  assert_memory_equal (a, b, 2 * DISK);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown (name, setup, teardown)
    T (test_map_lifo),
    T (test_engine_reuse),
    T (test_enospc),
    T (test_subslot_zeros),
    T (test_short_last_slot),
    T (test_record_codec),
    T (test_checkpoint_roundtrip),
    T (test_recover_prefixes),
    T (test_crash_image),
    T (test_meta_refused),
    T (test_checkpoint_concurrent),
#undef T
  };

  return cmocka_run_group_tests_name ("thin", tests, NULL, NULL);
}
