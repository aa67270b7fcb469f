/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of thin mode's data path and geometry
 * (thin.c, thin-open.c): zeros that keep or unmap their slots, zero-
 * fill only where a slot does not read as zeros, a short last slot,
 * slot=auto, a huge export over a small pool, and the map handed out in
 * runs.
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

/* A read in flight keeps its physical slot: a TRIM of its slots, the
 * commit that would free them and a write that reuses them all wait for
 * it, so it never returns another logical slot's data (thin-order.h).
 * The backend holds the read until the test lets it go.
 */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool armed, entered, go, trimmed;
  int (*pread) (struct backend *, void *, uint32_t, uint64_t);
} held = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};

static int
held_pread (struct backend *b, void *buf, uint32_t count, uint64_t offset)
{
  pthread_mutex_lock (&held.lock);
  if (held.armed) {
    held.armed = false;
    held.entered = true;
    pthread_cond_broadcast (&held.cond);
    while (!held.go)
      pthread_cond_wait (&held.cond, &held.lock);
  }
  pthread_mutex_unlock (&held.lock);
  return held.pread (b, buf, count, offset);
}

static unsigned char held_buf[SLOT];

static void *
held_reader (void *arg)
{
  return (void *) (intptr_t) volume_pread (vol, held_buf, SLOT, 0);
}

static void *
trim_and_reuse (void *arg)
{
  static unsigned char data[SLOT];
  int r;

  memset (data, 0x55, sizeof data);
  r = volume_trim (vol, 0, SLOT, false);
  if (r == 0)
    r = volume_flush (vol);
  pthread_mutex_lock (&held.lock);
  held.trimmed = true;
  pthread_mutex_unlock (&held.lock);
  if (r == 0)
    r = volume_pwrite (vol, data, SLOT, 5 * SLOT, false);
  return (void *) (intptr_t) r;
}

static void
test_read_keeps_its_slot (void **state)
{
  struct mem_backend *m = mem_backend_new (DISK, 4 * KiB, 1 << 30);
  pthread_t reader, trimmer;
  void *rr, *tr;
  int64_t p0;
  bool early;

  held.pread = m->ops.pread;
  m->ops.pread = held_pread;
  reserve_key = "1M";                   /* the freed slot is reused next */
  vol = open_thin_on (m, "64k", "2M");
  assert_non_null (vol);
  fill (0, SLOT, 0x11);
  assert_int_equal (volume_flush (vol), 0);
  p0 = phys_of (0);
  held.armed = true;
  held.entered = held.go = held.trimmed = false;
  assert_int_equal (pthread_create (&reader, NULL, held_reader, NULL), 0);
  pthread_mutex_lock (&held.lock);
  while (!held.entered)
    pthread_cond_wait (&held.cond, &held.lock);
  pthread_mutex_unlock (&held.lock);
  assert_int_equal (pthread_create (&trimmer, NULL, trim_and_reuse, NULL), 0);
  usleep (200000);
  pthread_mutex_lock (&held.lock);
  early = held.trimmed;
  held.go = true;
  pthread_cond_broadcast (&held.cond);
  pthread_mutex_unlock (&held.lock);
  pthread_join (reader, &rr);
  pthread_join (trimmer, &tr);
  assert_int_equal ((intptr_t) rr, 0);
  assert_int_equal ((intptr_t) tr, 0);
  /* The commit waited for the read; the read saw the old data. */
  assert_false (early);
  for (size_t i = 0; i < SLOT; i++)
    if (held_buf[i] != 0x11)
      fail_msg ("byte %zu of the read: %#x, expected 0x11", i, held_buf[i]);
  assert_int_equal (phys_of (5), p0);
  assert_filled (5 * SLOT, SLOT, 0x55);
  assert_filled (0, SLOT, 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) \
  cmocka_unit_test_setup_teardown (name, thin_setup, thin_teardown)
    T (test_dump_map_runs),
    T (test_read_keeps_its_slot),
    T (test_zero_keeps_slots),
    T (test_subslot_zeros),
    T (test_zero_fill_known_zero),
    T (test_zero_fill_known_clean),
    T (test_short_last_slot),
    T (test_slot_auto),
    T (test_huge_export),
#undef T
  };

  return cmocka_run_group_tests_name ("thin-io", tests, NULL, NULL);
}
