/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of thin mode's reuse reserve (reserve=,
 * invariant 12): the key; a run freed within the reserve is reused with
 * no discard before the write; past the reserve the largest runs are
 * discarded; the reserve survives a clean stop and a kill -9, none of it
 * mapped; discardctl flush --reserve, a smaller reserve= at a start and
 * space pressure discard it.
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine-test.h"
#include "mem-backend.h"
#include "thin-util.h"
#include "thin-pure.h"
#include "volume.h"

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

/* reserve_limit of a thin volume exporting size with reserve_key. */
static uint64_t
limit_of (const char *size)
{
  uint64_t limit;

  vol = open_thin_on (NULL, "64k", size);
  assert_non_null (vol);
  limit = stats ().th.reserve_limit;
  close_thin ();
  assert_int_equal (unlink (meta), 0);  /* the next size is another map */
  return limit;
}

/* Without reserve=, the larger of 64 MiB and 1% of the export; with a
 * percentage, that part of the export alone.
 */
static void
test_reserve_default (void **state)
{
  reserve_key = NULL;
  assert_int_equal (limit_of ("2M"), UINT64_C (64) << 20);
  assert_int_equal (limit_of ("6400M"), UINT64_C (64) << 20);
  assert_int_equal (limit_of ("100G"), UINT64_C (1024) << 20);
  reserve_key = "0.5%";
  assert_int_equal (limit_of ("100G"), UINT64_C (512) << 20);
  assert_int_equal (limit_of ("2M"), 0);
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

/* No reserve run is mapped in a meta image: each lies in its free set. */
static void
assert_reserve_unmapped (const unsigned char *img, size_t len,
                         uint64_t reserve_slots)
{
  struct thin_meta_id id = {
    .slot = SLOT, .size = 2 * DISK, .backend_size = DISK,
    .backend = *engine_saved_identity (eng),
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
  thin_recovery_release (&rec);
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

/* Space pressure (low-water=) wins: the next commit discards the whole
 * reserve, and unmaps under pressure go to the engine at once.
 */
static void
test_reserve_released_under_pressure (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];
  int64_t lone, three;

  reserve_key = "1M";
  open_thin ();
  free_lone_and_three (&lone, &three);
  assert_int_equal (stats ().th.reserve_bytes, 4 * SLOT);
  engine_set_pressure (eng, true);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (stats ().th.reserve_bytes, 0);
  assert_int_equal (stats ().th.reserve_released, 2);
  assert_int_equal (volume_trim (vol, 0, SLOT, false), 0);
  assert_int_equal (volume_flush (vol), 0);
  assert_int_equal (stats ().th.reserve_bytes, 0);
  /* Slots 0, 1 and 3-5 wait for their discards (1 and 3-5 released). */
  assert_int_equal (stats ().th.free_pending, 5);
  assert_int_equal (engine_drain (eng, NULL, NULL), 0);
  assert_true (mem_backend_calls (mem, c, MEM_MAX_CALLS) > 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown (name, thin_setup, thin_teardown)
    T (test_reserve_key),
    T (test_reserve_default),
    T (test_reserve_reuse_sends_nothing),
    T (test_reserve_largest_released),
    T (test_reserve_persists),
    T (test_reserve_released_on_request),
    T (test_reserve_released_under_pressure),
#undef T
  };

  return cmocka_run_group_tests_name ("thin-reserve", tests, NULL, NULL);
}
