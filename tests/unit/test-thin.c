/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of thin mode: the map of runs, the free space
 * and the allocator (contiguity, best-fit reuse of pending runs, clean
 * space), ENOSPC before anything is written, zeros that keep or unmap
 * their slots, zero-fill only where a slot does not read as zeros, the
 * journal's records and checkpoint, recovery of every prefix of a
 * journal, crash images, version 1 meta files, and meta files that
 * belong to something else.
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
/* reserve= of the next volume opened: none unless a test sets it, so
 * that every freed run goes to the engine as before reserve= existed.
 */
static const char *reserve_key;

static int
setup (void **state)
{
  scratch_make (dir, sizeof dir, "test-thin");
  reserve_key = "0";
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
 * with a delay that keeps discards pending.  Sets eng; NULL (and eng
 * NULL) when the volume is refused.
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
  assert_int_equal (volume_config_set (&vcfg, "reserve", reserve_key), 0);
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

/* Exported size twice the backend's. */
static void
open_thin (void)
{
  vol = open_thin_on (NULL, "64k", "2M");
  assert_non_null (vol);
}

/* A backend full of non-zero bytes, as a used disk. */
static struct mem_backend *
used_backend (uint64_t size)
{
  struct mem_backend *m = mem_backend_new (size, 4 * KiB, 1 << 30);

  memset (m->data, 0xee, size);
  return m;
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
  static unsigned char buf[64 * SLOT];

  memset (buf, byte, length);
  assert_int_equal (volume_pwrite (vol, buf, length, offset, false), 0);
}

static void
assert_filled (uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[64 * SLOT];

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
  struct volume_map_run run;

  if (volume_dump_map_batch (vol, l, &run, 1) <= 0 || run.logical != l)
    return -1;
  return run.physical;
}

static unsigned char *
read_file (const char *path, size_t *len)
{
  struct stat st;
  unsigned char *p;
  int fd = open (path, O_RDONLY);

  if (fd < 0)
    fail_msg ("%s: %s", path, strerror (errno));
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

/* What a kill -9 leaves: close this volume, put back meta image img
 * (freed) and start again on copy, the backend as it was then.
 */
static void
reopen_after_crash (struct mem_backend *copy, unsigned char *img, size_t len)
{
  close_thin ();
  write_file (meta, img, len);
  free (img);
  vol = open_thin_on (copy, "64k", "2M");
  assert_non_null (vol);
}

/* The map of runs: lookups, joins, cuts. */
static void
test_map_runs (void **state)
{
  struct thin_map m;
  uint64_t n;
  uint32_t p;

  assert_int_equal (thin_map_init (&m, 100, 50), 0);
  assert_false (thin_map_lookup (&m, 0, 100, &p, &n));
  assert_int_equal (n, 100);
  assert_int_equal (thin_map_add (&m, 10, 5, 20), 0);
  assert_int_equal (thin_map_add (&m, 15, 5, 25), 0);   /* joins */
  assert_int_equal (thin_map_runs (&m), 1);
  assert_int_equal (thin_map_add (&m, 20, 1, 40), 0);   /* does not */
  assert_int_equal (thin_map_runs (&m), 2);
  assert_true (thin_map_lookup (&m, 12, 100, &p, &n));
  assert_int_equal (p, 22);
  assert_int_equal (n, 8);
  assert_false (thin_map_lookup (&m, 3, 100, &p, &n));
  assert_int_equal (n, 7);
  /* Overlaps and ranges past either space are refused. */
  assert_int_equal (thin_map_add (&m, 19, 2, 0), -1);
  assert_int_equal (thin_map_add (&m, 99, 2, 0), -1);
  assert_int_equal (thin_map_add (&m, 50, 2, 49), -1);
  assert_int_equal (m.mapped, 11);
  /* A cut in the middle keeps both ends. */
  assert_int_equal (thin_map_remove (&m, 12, 2), 0);
  assert_true (thin_map_lookup (&m, 14, 100, &p, &n));
  assert_int_equal (p, 24);
  assert_int_equal (n, 6);
  assert_int_equal (m.mapped, 9);
  thin_map_free (&m);
}

/* Recovery's checks: a map record takes only free slots, an unmap only
 * a run mapped so.
 */
static void
test_map_replay_checks (void **state)
{
  struct thin_map m;
  struct extmap *free_set;

  assert_int_equal (thin_map_init (&m, 100, 50), 0);
  assert_int_equal (thin_map_add (&m, 0, 10, 5), 0);
  free_set = thin_map_free_set (&m);
  assert_non_null (free_set);
  assert_int_equal (extmap_bytes (free_set), 40);
  assert_int_equal (thin_map_replay_map (&m, free_set, 20, 2, 14), -1);
  assert_int_equal (thin_map_replay_map (&m, free_set, 5, 2, 30), -1);
  assert_int_equal (thin_map_replay_map (&m, free_set, 20, 2, 15), 0);
  assert_int_equal (thin_map_replay_unmap (&m, free_set, 3, 2, 9), -1);
  assert_int_equal (thin_map_replay_unmap (&m, free_set, 3, 2, 8), 0);
  assert_int_equal (thin_map_replay_map (&m, free_set, 50, 2, 8), 0);
  assert_int_equal (extmap_bytes (free_set), 38);
  thin_map_free (&m);
  extmap_free (free_set);
  /* Two runs on one physical slot: no free set. */
  assert_int_equal (thin_map_init (&m, 100, 50), 0);
  assert_int_equal (thin_map_add (&m, 0, 10, 5), 0);
  assert_int_equal (thin_map_add (&m, 20, 10, 14), 0);
  assert_null (thin_map_free_set (&m));
  thin_map_free (&m);
}

/* Best fit among pending runs: the shortest that holds the request,
 * the most recently freed among equals, else the longest; clean space
 * from its largest run.
 */
static void
test_space_best_fit (void **state)
{
  struct thin_space s;
  struct extent x;

  assert_int_equal (thin_space_init (&s), 0);
  assert_false (thin_space_best_pending (&s, 1, &x));
  thin_space_add_pending (&s, 100, 4);
  thin_space_add_pending (&s, 10, 1);
  thin_space_add_pending (&s, 200, 8);
  thin_space_add_pending (&s, 20, 1);
  thin_space_add_pending (&s, 300, 2);
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 20);            /* length 1, the newer */
  assert_true (thin_space_best_pending (&s, 2, &x));
  assert_int_equal (x.offset, 300);
  assert_true (thin_space_best_pending (&s, 3, &x));
  assert_int_equal (x.offset, 100);
  assert_true (thin_space_best_pending (&s, 5, &x));
  assert_int_equal (x.offset, 200);
  assert_true (thin_space_best_pending (&s, 9, &x));
  assert_int_equal (x.offset, 200);           /* none fits: the longest */
  assert_int_equal (x.length, 8);
  /* Taking an end keeps the rest in its place. */
  assert_int_equal (thin_space_take (&s, 20, 1), 0);
  assert_int_equal (thin_space_take (&s, 100, 3), 0);
  /* 103 is left of a run freed before 10: it keeps its place. */
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 10);
  assert_int_equal (thin_space_take (&s, 10, 1), 0);
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 103);
  /* Freeing next to a run joins it, and makes it the newest. */
  thin_space_add_pending (&s, 104, 2);
  assert_true (thin_space_best_pending (&s, 3, &x));
  assert_int_equal (x.offset, 103);
  assert_int_equal (x.length, 3);
  assert_true (thin_space_best_pending (&s, 2, &x));
  assert_int_equal (x.offset, 300);
  thin_space_add_pending (&s, 302, 1);
  assert_true (thin_space_best_pending (&s, 3, &x));
  assert_int_equal (x.offset, 300);
  /* A slot taken must be an end of one free run. */
  assert_int_equal (thin_space_take (&s, 40, 1), -1);
  assert_int_equal (thin_space_take (&s, 300, 4), -1);
  /* Clean space and what reads as zeros. */
  thin_space_add_clean (&s, 1000, 10, true);
  thin_space_add_clean (&s, 2000, 50, false);
  thin_space_learn_zero (&s, 2040, 100);
  assert_int_equal (thin_space_largest_clean (&s, 40, &x), THIN_CLEAN);
  assert_int_equal (x.offset, 2000);
  assert_int_equal (thin_space_largest_clean (&s, 10, &x), THIN_ZERO);
  assert_int_equal (x.offset, 1000);            /* zero, and holds 10 */
  assert_true (thin_space_is_zero (&s, 1000, 10));
  assert_true (thin_space_is_zero (&s, 2045, 5));
  assert_false (thin_space_is_zero (&s, 2039, 2));
  assert_int_equal (thin_space_take (&s, 1000, 2), 0);
  assert_false (thin_space_is_zero (&s, 1000, 1));
  assert_true (thin_space_is_zero (&s, 1002, 1));
  assert_int_equal (thin_space_find (&s, 200, &x), THIN_PENDING);
  assert_int_equal (thin_space_find (&s, 2001, &x), THIN_CLEAN);
  assert_int_equal (thin_space_find (&s, 2045, &x), THIN_ZERO);
  assert_int_equal (thin_space_find (&s, 1001, &x), THIN_NOT_FREE);
  assert_int_equal (thin_space_slots (&s), 3 + 8 + 3 + 8 + 50);
  thin_space_free (&s);
}

/* Sequence numbers renumbered before they wrap keep the order. */
static void
test_space_renumber (void **state)
{
  struct thin_space s;
  struct extent x;

  assert_int_equal (thin_space_init (&s), 0);
  s.pending.seq_limit = 10;
  for (uint64_t i = 0; i < 40; i++)
    thin_space_add_pending (&s, i * 10, 1 + i % 3);
  /* The newest run of each length. */
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 390);
  assert_true (thin_space_best_pending (&s, 3, &x));
  assert_int_equal (x.offset, 380);
  assert_true (thin_space_oldest_pending (&s, &x));
  assert_int_equal (x.offset, 0);
  thin_space_free (&s);
}

/* 100k lone pending slots: every pick is the newest, and taking them
 * all one by one is fast (each pick is a search, not a walk).
 */
static void
test_space_many_runs (void **state)
{
  const uint64_t runs = 100000;
  struct thin_space s;
  struct extent x;

  assert_int_equal (thin_space_init (&s), 0);
  for (uint64_t i = 0; i < runs; i++)
    thin_space_add_pending (&s, i * 2, 1);
  thin_space_add_pending (&s, 3 * runs, 5);
  for (uint64_t i = runs; i-- > 0; ) {
    assert_true (thin_space_best_pending (&s, 1, &x));
    assert_int_equal (x.offset, i * 2);
    assert_int_equal (thin_space_take (&s, x.offset, 1), 0);
  }
  assert_true (thin_space_best_pending (&s, 1, &x));
  assert_int_equal (x.offset, 3 * runs);
  thin_space_free (&s);
}

/* Through the engine: a stream of writes gets consecutive physical
 * slots even with other writes between; slots freed by TRIMs (discard
 * pending) are reused best fit, their discards never sent.
 */
static void
test_contiguity_and_reuse (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];
  int64_t p;

  vol = open_thin_on (mem_backend_new (4 * DISK, 4 * KiB, 1 << 30),
                      "64k", "8M");
  assert_non_null (vol);
  /* Two streams, interleaved slot by slot, each in 4 KiB writes. */
  for (int l = 0; l < 8; l++) {
    for (int b = 0; b < 16; b++) {
      fill (l * SLOT + b * 4 * KiB, 4 * KiB, 0x10 + l);
      fill ((40 + l) * SLOT + b * 4 * KiB, 4 * KiB, 0x50 + l);
    }
  }
  p = phys_of (0);
  for (int l = 1; l < 8; l++)
    assert_int_equal (phys_of (l), p + l);
  p = phys_of (40);
  for (int l = 1; l < 8; l++)
    assert_int_equal (phys_of (40 + l), p + l);
  assert_true (stats ().th.mapped_runs <= 4);
  assert_int_equal (volume_flush (vol), 0);

  /* Free a lone slot and a run of three. */
  p = phys_of (2);
  assert_int_equal (volume_trim (vol, 2 * SLOT, SLOT, false), 0);
  assert_int_equal (volume_trim (vol, 44 * SLOT, 3 * SLOT, false), 0);
  assert_int_equal (stats ().th.free_undurable, 4);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (stats ().th.free_pending, 4);
  assert_int_equal (stats ().th.free_pending_runs, 2);
  assert_int_equal (stats ().th.free_pending_largest, 3);
  /* One slot: the lone one fits best. */
  fill (20 * SLOT, SLOT, 0x20);
  assert_int_equal (phys_of (20), p);
  /* Three slots in one write: the run of three. */
  fill (24 * SLOT, 3 * SLOT, 0x24);
  assert_int_equal (phys_of (25), phys_of (24) + 1);
  assert_int_equal (phys_of (26), phys_of (24) + 2);
  assert_int_equal (stats ().th.reused, 4);
  assert_int_equal (stats ().th.free_pending, 0);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  assert_int_equal (mem_backend_calls (mem, c, MEM_MAX_CALLS), 0);
  assert_filled (0, SLOT, 0x10);
  assert_filled (SLOT, SLOT, 0x11);
  assert_filled (2 * SLOT, SLOT, 0);
  assert_filled (20 * SLOT, SLOT, 0x20);
  assert_filled (24 * SLOT, 3 * SLOT, 0x24);
  assert_filled (47 * SLOT, SLOT, 0x57);
}

/* Reuse comes before contiguity into clean space: a stream whose next
 * physical slot is clean takes a pending slot instead while there is
 * one; with none, it goes on where it was.
 */
static void
test_reuse_before_clean (void **state)
{
  int64_t p, q;

  vol = open_thin_on (mem_backend_new (4 * DISK, 4 * KiB, 1 << 30),
                      "64k", "8M");
  assert_non_null (vol);
  fill (0, 4 * SLOT, 0x01);
  fill (10 * SLOT, SLOT, 0x02);
  q = phys_of (10);
  assert_int_equal (volume_trim (vol, 10 * SLOT, SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
  fill (4 * SLOT, SLOT, 0x03);
  assert_int_equal (phys_of (4), q);
  assert_int_equal (stats ().th.reused, 1);
  p = phys_of (4);
  fill (5 * SLOT, SLOT, 0x04);
  assert_int_equal (phys_of (5), p + 1);
}

/* The map is handed out in runs (discardctl dump --map): a write of
 * four slots is one run, a lone slot another; a batch that starts
 * inside a run starts there; max bounds the batch.
 */
static void
test_dump_map_runs (void **state)
{
  struct volume_map_run r[4];

  vol = open_thin_on (mem_backend_new (4 * DISK, 4 * KiB, 1 << 30),
                      "64k", "8M");
  assert_non_null (vol);
  fill (8 * SLOT, 4 * SLOT, 0x08);
  fill (20 * SLOT, SLOT, 0x20);
  assert_int_equal (volume_dump_map_batch (vol, 0, r, 4), 2);
  assert_int_equal (r[0].logical, 8);
  assert_int_equal (r[0].length, 4);
  assert_int_equal (r[0].physical, phys_of (8));
  assert_int_equal (phys_of (11), r[0].physical + 3);
  assert_int_equal (r[1].logical, 20);
  assert_int_equal (r[1].length, 1);
  assert_int_equal (r[1].physical, phys_of (20));
  assert_int_equal (volume_dump_map_batch (vol, 10, r, 1), 1);
  assert_int_equal (r[0].logical, 10);
  assert_int_equal (r[0].length, 2);
  assert_int_equal (r[0].physical, phys_of (10));
  assert_int_equal (volume_dump_map_batch (vol, 21, r, 4), 0);
}

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

/* The reproducer: 16 slots of 64 KiB on a 1 MiB file exported
 * as 4M; 512 bytes into each slot; then 64 KiB at 15*64K+32K, half in
 * mapped slot 15, half in unmapped slot 16: ENOSPC, and slot 15 is
 * unchanged.  A trim makes room (the write commits the unmap itself).
 */
static void
test_enospc_changes_nothing (void **state)
{
  static unsigned char buf[SLOT];

  vol = open_thin_on (NULL, "64k", "4M");
  assert_non_null (vol);
  for (int l = 0; l < NPHYS; l++)
    fill (l * SLOT, 512, 0x40 + l);
  memset (buf, 0x99, sizeof buf);
  errno = 0;
  assert_int_equal (volume_pwrite (vol, buf, SLOT, 15 * SLOT + 32 * KiB,
                                   false), -1);
  assert_int_equal (errno, ENOSPC);
  assert_int_equal (stats ().th.enospc, 1);
  assert_filled (15 * SLOT, 512, 0x4f);
  assert_filled (15 * SLOT + 512, SLOT - 512, 0);
  assert_filled (16 * SLOT, SLOT, 0);
  /* Writes to mapped slots go on; nothing else changed. */
  fill (2 * SLOT + 100, 100, 0x77);
  assert_filled (2 * SLOT + 100, 100, 0x77);
  for (int l = 3; l < NPHYS; l++)
    assert_filled (l * SLOT, 512, 0x40 + l);
  assert_int_equal (stats ().th.free_clean + stats ().th.free_pending, 0);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  assert_int_equal (volume_pwrite (vol, buf, SLOT, 15 * SLOT + 32 * KiB,
                                   false), 0);
  assert_filled (15 * SLOT + 32 * KiB, SLOT, 0x99);
  assert_filled (16 * SLOT + 32 * KiB, SLOT / 2, 0);
  assert_filled (15 * SLOT, 512, 0x4f);
  assert_int_equal (stats ().th.reused, 1);
}

/* A zero without may_trim keeps its slots mapped (loop's no-unmap
 * zeroing asks for that); a zero that may trim, and a TRIM, unmap.
 */
static void
test_zero_keeps_slots (void **state)
{
  int64_t p;

  open_thin ();
  fill (0, 4 * SLOT, 0xcc);
  p = phys_of (1);
  assert_int_equal (volume_zero (vol, SLOT, 2 * SLOT, false, false, false), 0);
  assert_int_equal (phys_of (1), p);
  assert_int_equal (phys_of (2), p + 1);
  assert_filled (SLOT, 2 * SLOT, 0);
  assert_filled (0, SLOT, 0xcc);
  assert_int_equal (stats ().th.mapped, 4);
  /* Unmapped slots stay unmapped. */
  assert_int_equal (volume_zero (vol, 10 * SLOT, SLOT, false, false, false), 0);
  assert_int_equal (phys_of (10), -1);
  assert_int_equal (volume_zero (vol, SLOT, SLOT, true, false, false), 0);
  assert_int_equal (phys_of (1), -1);
  assert_int_equal (volume_trim (vol, 2 * SLOT, SLOT, false), 0);
  assert_int_equal (phys_of (2), -1);
  assert_int_equal (stats ().th.mapped, 2);
  /* Parts of slots: zeros at the physical address, slot kept. */
  assert_int_equal (volume_zero (vol, 10, 10, true, false, false), 0);
  assert_filled (10, 10, 0);
  assert_filled (20, 100, 0xcc);
  assert_int_equal (phys_of (0), p - 1);
}

/* A new slot reads as zeros around its first write, even when it still
 * holds its previous owner's data (discard pending, not sent), and the
 * zero-fill is one request a slot.
 */
static void
test_subslot_zeros (void **state)
{
  unsigned zeros;
  int64_t p;

  open_thin ();
  fill (0, SLOT, 0xaa);
  assert_int_equal (volume_flush (vol), 0);
  p = phys_of (0);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (mem->data[p * SLOT + 5000], 0xaa);
  zeros = mem->zero_calls;
  fill (5 * SLOT + 1000, 100, 0xbb);
  assert_int_equal (mem->zero_calls, zeros + 1);
  assert_int_equal (stats ().th.zero_fills, 1);
  assert_int_equal (phys_of (5), p);
  assert_filled (5 * SLOT, 1000, 0);
  assert_filled (5 * SLOT + 1000, 100, 0xbb);
  assert_filled (5 * SLOT + 1100, SLOT - 1100, 0);
  for (uint64_t i = 0; i < SLOT; i++)
    assert_true (mem->data[p * SLOT + i] != 0xaa);
  /* Only the head uncovered, then a write across two new slots: one
   * zero each for the partly covered ones.
   */
  fill (7 * SLOT + 100, SLOT - 100, 0x71);
  assert_int_equal (mem->zero_calls, zeros + 2);
  fill (8 * SLOT + 100, 2 * SLOT, 0x72);
  assert_int_equal (mem->zero_calls, zeros + 4);
  assert_filled (8 * SLOT, 100, 0);
  assert_filled (10 * SLOT + 100, SLOT - 100, 0);
  assert_filled (7 * SLOT + 100, SLOT - 100, 0x71);
}

/* No zero-fill tax where the backend reads zeros: on a fresh backend
 * that reports its holes, a 4 KiB write into a new slot is the write
 * alone.  On a used one, one zero request.
 */
static void
test_zero_fill_known_zero (void **state)
{
  struct mem_backend *m = mem_backend_new (DISK, 4 * KiB, 1 << 30);
  unsigned writes;

  mem_backend_enable_extents (m);
  vol = open_thin_on (m, "64k", "2M");
  assert_non_null (vol);
  assert_int_equal (stats ().th.free_zero, NPHYS);
  writes = mem->write_calls;
  for (int l = 0; l < 8; l++)
    fill (l * 3 * SLOT + 8 * KiB, 4 * KiB, 0x30 + l);
  assert_int_equal (mem->zero_calls, 0);
  assert_int_equal (mem->write_calls, writes + 8);
  assert_int_equal (stats ().th.zero_fills, 0);
  for (int l = 0; l < 8; l++) {
    assert_filled (l * 3 * SLOT, 8 * KiB, 0);
    assert_filled (l * 3 * SLOT + 12 * KiB, SLOT - 12 * KiB, 0);
  }
  close_thin ();
  unlink (meta);

  m = used_backend (DISK);
  mem_backend_enable_extents (m);
  vol = open_thin_on (m, "64k", "2M");
  assert_non_null (vol);
  assert_int_equal (stats ().th.free_zero, 0);
  fill (8 * KiB, 4 * KiB, 0x30);
  assert_int_equal (mem->zero_calls, 1);
  assert_filled (0, 8 * KiB, 0);
  assert_filled (12 * KiB, SLOT - 12 * KiB, 0);
}

/* A freed slot whose discard went out on a backend whose discard
 * zeroes (the engine knows it clean) needs no zero-fill either; one
 * whose discard is still pending does.
 */
static void
test_zero_fill_known_clean (void **state)
{
  unsigned zeros;

  open_thin ();
  fill (0, SLOT, 0xaa);
  fill (2 * SLOT, SLOT, 0xbb);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  zeros = mem->zero_calls;
  fill (5 * SLOT + 1000, 100, 0x55);
  assert_int_equal (mem->zero_calls, zeros);
  assert_filled (5 * SLOT, 1000, 0);
  assert_filled (5 * SLOT + 1100, SLOT - 1100, 0);
  /* Pending, not sent: zero-filled. */
  assert_int_equal (volume_trim (vol, 2 * SLOT, SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
  fill (7 * SLOT + 1000, 100, 0x77);
  assert_int_equal (mem->zero_calls, zeros + 1);
  assert_filled (7 * SLOT, 1000, 0);
  assert_filled (7 * SLOT + 1100, SLOT - 1100, 0);
  assert_int_equal (stats ().th.zero_fills, 1);
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

/* slot=auto: the discard granularity, at least 4 KiB, for a new meta
 * file; an existing one's slot size otherwise (one made with slot=64k
 * keeps working without the key).
 */
static void
test_slot_auto (void **state)
{
  vol = open_thin_on (NULL, "auto", "2M");
  assert_non_null (vol);
  assert_int_equal (stats ().th.slot, 4 * KiB);
  close_thin ();
  unlink (meta);
  vol = open_thin_on (mem_backend_new (DISK, 16 * KiB, 1 << 30), "auto", "2M");
  assert_non_null (vol);
  assert_int_equal (stats ().th.slot, 16 * KiB);
  close_thin ();
  unlink (meta);
  open_thin ();
  fill (0, SLOT, 0x42);
  close_thin ();
  vol = open_thin_on (NULL, "auto", "2M");
  assert_non_null (vol);
  assert_int_equal (stats ().th.slot, SLOT);
  assert_int_equal (stats ().th.mapped, 1);
}

/* A 64 TiB export over a 1 MiB pool: nothing in memory follows the
 * exported size.
 */
static void
test_huge_export (void **state)
{
  vol = open_thin_on (NULL, "64k", "64T");
  assert_non_null (vol);
  fill ((UINT64_C (64) << 40) - SLOT, SLOT, 0x11);
  fill (UINT64_C (1) << 40, 4 * KiB, 0x12);
  assert_filled ((UINT64_C (64) << 40) - SLOT, SLOT, 0x11);
  assert_int_equal (stats ().th.mapped, 2);
  assert_true (stats ().th.memory_bytes < 1024 * 1024);
  assert_int_equal (volume_trim (vol, 0, UINT64_C (64) << 40, false), 0);
  assert_int_equal (stats ().th.mapped, 0);
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
    extmap_free (rec.free);
    thin_map_free (&r);
    /* Any damaged byte is refused. */
    for (size_t i = 0; i < len; i += 7) {
      img[i] ^= 0x10;
      assert_int_equal (thin_map_init (&r, 2 * NPHYS, NPHYS), 0);
      assert_int_equal (thin_meta_recover (img, len, &test_id, &r, &rec, why,
                                           sizeof why), -1);
      assert_null (rec.free);
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
  assert_non_null (strstr (why, "format version 7"));
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
    extmap_free (rec->free);
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
    extmap_free (rec.free);
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

/* The reuse reserve (reserve=, invariant 12). */

static void
test_reserve_key (void **state)
{
  struct volume_config c;

  volume_config_init (&c);
  assert_int_equal (volume_config_set (&c, "reserve", "1.5%"), 0);
  assert_true (c.reserve_percent);
  assert_int_equal (c.reserve, 150);
  assert_int_equal (volume_config_set (&c, "reserve", "64M"), 0);
  assert_false (c.reserve_percent);
  assert_int_equal (c.reserve, 64 << 20);
  assert_int_equal (volume_config_set (&c, "reserve", "100%"), 0);
  assert_int_equal (c.reserve, 10000);
  /* Bad values change nothing. */
  assert_int_equal (volume_config_set (&c, "reserve", "101%"), -1);
  assert_int_equal (volume_config_set (&c, "reserve", "1.234%"), -1);
  assert_int_equal (volume_config_set (&c, "reserve", "%"), -1);
  assert_int_equal (volume_config_set (&c, "reserve", "-1%"), -1);
  assert_int_equal (volume_config_set (&c, "reserve", "x"), -1);
  assert_int_equal (c.reserve, 10000);
  assert_true (c.reserve_percent);
  volume_config_free (&c);
}

/* Slots 0-5 written, then a lone slot (1) and a run of three (3-5)
 * trimmed and the trims made durable.
 */
static void
free_lone_and_three (int64_t *lone, int64_t *three)
{
  fill (0, 6 * SLOT, 0x01);
  assert_int_equal (volume_flush (vol), 0);
  *lone = phys_of (1);
  *three = phys_of (3);
  assert_int_equal (volume_trim (vol, SLOT, SLOT, false), 0);
  assert_int_equal (volume_trim (vol, 3 * SLOT, 3 * SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
}

/* A run freed within the reserve is not discarded, even when the engine
 * forwards everything it holds; a write reuses it, and the device sees
 * no discard before that write.
 */
static void
test_reserve_reuse_sends_nothing (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];
  int64_t lone, three;

  reserve_key = "1M";
  open_thin ();
  free_lone_and_three (&lone, &three);
  assert_int_equal (stats ().th.reserve_bytes, 4 * SLOT);
  assert_int_equal (stats ().th.reserve_runs, 2);
  assert_int_equal (stats ().th.free_pending, 0);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  assert_int_equal (mem_backend_calls (mem, c, MEM_MAX_CALLS), 0);
  /* The trimmed slots read as zeros at once (the client's TRIM). */
  assert_filled (SLOT, SLOT, 0);
  assert_filled (3 * SLOT, 3 * SLOT, 0);
  fill (20 * SLOT, SLOT, 0x20);
  assert_int_equal (phys_of (20), lone);
  fill (24 * SLOT, 3 * SLOT, 0x24);
  assert_int_equal (phys_of (24), three);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  assert_int_equal (mem_backend_calls (mem, c, MEM_MAX_CALLS), 0);
  assert_int_equal (stats ().th.reserve_bytes, 0);
  assert_int_equal (stats ().th.reserve_writes, 2);
  assert_int_equal (stats ().th.discards_avoided, 2);
  assert_int_equal (stats ().th.discards_avoided_bytes, 4 * SLOT);
  assert_int_equal (stats ().th.reused, 0);
  assert_filled (20 * SLOT, SLOT, 0x20);
  assert_filled (24 * SLOT, 3 * SLOT, 0x24);
}

/* Past the reserve the largest runs go first: of runs of 1, 1, 3 and 5
 * slots with room for 4, the 5 and the 3 are discarded, the two lone
 * slots kept.
 */
static void
test_reserve_largest_released (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];
  int64_t p0;
  unsigned n;

  reserve_key = "256k";
  open_thin ();
  fill (0, 13 * SLOT, 0x01);
  assert_int_equal (volume_flush (vol), 0);
  p0 = phys_of (0);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  assert_int_equal (volume_trim (vol, 8 * SLOT, 5 * SLOT, false), 0);
  assert_int_equal (volume_trim (vol, 2 * SLOT, SLOT, false), 0);
  assert_int_equal (volume_trim (vol, 4 * SLOT, 3 * SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (stats ().th.reserve_bytes, 2 * SLOT);
  assert_int_equal (stats ().th.reserve_runs, 2);
  assert_int_equal (stats ().th.reserve_released, 2);
  assert_int_equal (stats ().th.reserve_released_bytes, 8 * SLOT);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  n = mem_backend_calls (mem, c, MEM_MAX_CALLS);
  assert_int_equal (n, 2);
  if (c[0].offset > c[1].offset) {
    struct mem_discard d = c[0];

    c[0] = c[1];
    c[1] = d;
  }
  assert_int_equal (c[0].offset, (p0 + 4) * SLOT);
  assert_int_equal (c[0].length, 3 * SLOT);
  assert_int_equal (c[1].offset, (p0 + 8) * SLOT);
  assert_int_equal (c[1].length, 5 * SLOT);
  assert_filled (SLOT, SLOT, 0x01);
  assert_filled (3 * SLOT, SLOT, 0x01);
  assert_filled (7 * SLOT, SLOT, 0x01);
}

/* A clean stop and a start again, on the backend as the stop left it. */
static void
restart (void)
{
  struct mem_backend *m = mem_backend_new (DISK, 4 * KiB, 1 << 30);

  memcpy (m->data, mem->data, DISK);
  close_thin ();
  vol = open_thin_on (m, "64k", "2M");
  assert_non_null (vol);
}

/* No reserve run is mapped in a meta image: each lies in its free set. */
static void
assert_reserve_unmapped (const unsigned char *img, size_t len,
                         uint64_t reserve_slots)
{
  struct thin_meta_id id = {
    .slot = SLOT, .size = 2 * DISK, .backend_size = DISK,
    .backend = *engine_identity (eng),
  };
  struct thin_recovery rec;
  struct thin_map m;
  struct extent x;
  char why[256];

  assert_int_equal (thin_map_init (&m, 2 * NPHYS, NPHYS), 0);
  if (thin_meta_recover (img, len, &id, &m, &rec, why, sizeof why) == -1)
    fail_msg ("%s", why);
  assert_int_equal (extmap_bytes (rec.reserve), reserve_slots);
  for (uint64_t p = 0; extmap_find_from (rec.reserve, p, &x);
       p = x.offset + x.length) {
    struct extent f;

    assert_true (extmap_find_overlap (rec.free, x.offset, x.length, &f));
    assert_true (f.offset <= x.offset &&
                 f.offset + f.length >= x.offset + x.length);
  }
  extmap_free (rec.free);
  extmap_free (rec.reserve);
  thin_map_free (&m);
}

/* The reserve is in the meta file: a clean stop neither discards nor
 * forgets it, and after a kill -9 it is what the last FLUSH made
 * durable, none of it mapped; writes then reuse it without a discard
 * and without touching live data.
 */
static void
test_reserve_persists (void **state)
{
  struct mem_backend *copy = mem_backend_new (DISK, 4 * KiB, 1 << 30);
  struct mem_discard c[MEM_MAX_CALLS];
  int64_t lone, three;
  unsigned char *img;
  size_t len;

  reserve_key = "1M";
  open_thin ();
  free_lone_and_three (&lone, &three);
  restart ();
  img = read_file (meta, &len);
  assert_reserve_unmapped (img, len, 4);
  free (img);
  assert_int_equal (stats ().th.reserve_bytes, 4 * SLOT);
  assert_int_equal (stats ().th.reserve_runs, 2);
  /* Taken partly, freed more: journal records over the checkpoint. */
  fill (20 * SLOT, SLOT, 0x20);
  assert_int_equal (phys_of (20), lone);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
  img = read_file (meta, &len);
  memcpy (copy->data, mem->data, DISK);
  assert_reserve_unmapped (img, len, 4);
  /* Lost at the crash. */
  fill (30 * SLOT, SLOT, 0x30);
  reopen_after_crash (copy, img, len);
  assert_int_equal (stats ().th.reserve_bytes, 4 * SLOT);
  assert_filled (20 * SLOT, SLOT, 0x20);
  assert_filled (2 * SLOT, SLOT, 0x01);
  fill (24 * SLOT, 4 * SLOT, 0x24);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  assert_int_equal (mem_backend_calls (mem, c, MEM_MAX_CALLS), 0);
  assert_filled (20 * SLOT, SLOT, 0x20);
  assert_filled (2 * SLOT, SLOT, 0x01);
  assert_filled (24 * SLOT, 4 * SLOT, 0x24);
  assert_int_equal (stats ().th.reserve_bytes, 0);
}

/* discardctl flush --reserve: the whole reserve goes to the engine, and
 * a restart with a smaller reserve= discards what it no longer holds.
 */
static void
test_reserve_released_on_request (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];
  int64_t lone, three;

  reserve_key = "1M";
  open_thin ();
  free_lone_and_three (&lone, &three);
  assert_int_equal (volume_release_reserve (vol), 0);
  assert_int_equal (stats ().th.reserve_bytes, 0);
  assert_int_equal (stats ().th.reserve_released, 2);
  /* After the commit, the slots are pending space as before. */
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (stats ().th.free_pending, 4);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  assert_int_equal (mem_backend_calls (mem, c, MEM_MAX_CALLS), 2);
  close_thin ();

  open_thin ();
  free_lone_and_three (&lone, &three);
  reserve_key = "0";
  restart ();
  assert_int_equal (stats ().th.reserve_bytes, 0);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  assert_int_equal (mem_backend_calls (mem, c, MEM_MAX_CALLS), 2);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown (name, setup, teardown)
    T (test_reserve_key),
    T (test_reserve_reuse_sends_nothing),
    T (test_reserve_largest_released),
    T (test_reserve_persists),
    T (test_reserve_released_on_request),
    T (test_map_runs),
    T (test_map_replay_checks),
    T (test_space_best_fit),
    T (test_space_renumber),
    T (test_space_many_runs),
    T (test_contiguity_and_reuse),
    T (test_reuse_before_clean),
    T (test_dump_map_runs),
    T (test_commit_follows_map),
    T (test_enospc_changes_nothing),
    T (test_zero_keeps_slots),
    T (test_subslot_zeros),
    T (test_zero_fill_known_zero),
    T (test_zero_fill_known_clean),
    T (test_crash_zero_claims),
    T (test_short_last_slot),
    T (test_slot_auto),
    T (test_huge_export),
    T (test_record_codec),
    T (test_checkpoint_roundtrip),
    T (test_recover_prefixes),
    T (test_crash_image),
    T (test_meta_refused),
    T (test_meta_v1_converted),
    T (test_checkpoint_concurrent),
#undef T
  };

  return cmocka_run_group_tests_name ("thin", tests, NULL, NULL);
}
