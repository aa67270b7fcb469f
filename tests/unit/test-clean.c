/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the known-clean map (invariant 9, discard once) through
 * the engine and the in-memory backend: a TRIM over what the backend
 * discarded and nothing wrote since is acknowledged and counted, not
 * sent; over partly clean space only the rest is recorded; a write or
 * zero makes its granules dirty (also when it waited for a discard in
 * flight), so a later TRIM over them reaches the backend; failed and
 * partial discards, alignment, FUA, passthrough, zeroes that unmap, the
 * bound, forget-clean, off, and a whole-device discard.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "engine.h"
#include "engine-util.h"
#include "mem-backend.h"

#define DISK (4 * MiB)

static struct mem_backend *mem;
static struct engine *e;

static void
open_engine (const char *const *keys)
{
  static const char *const defaults[] = {
    "delay", "1h",              /* only drains forward */
    "idle", "0", NULL,
  };

  mem = mem_backend_new (DISK, 4 * KiB, 64 * MiB);
  e = open_engine_on (mem, defaults, keys);
}

static int
teardown (void **state)
{
  engine_close (e);
  e = NULL;
  return 0;
}

static void
trim (uint64_t offset, uint64_t length)
{
  assert_int_equal (engine_trim (e, offset, length, false), 0);
}

static void
drain (void)
{
  assert_int_equal (engine_drain (e, NULL, NULL), 0);
}

static void
fill (uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[1 * MiB];

  memset (buf, byte, length);
  assert_int_equal (engine_pwrite (e, buf, length, offset, false), 0);
}

/* Trim and forward [offset, offset+length): known clean afterwards. */
static void
discard (uint64_t offset, uint64_t length)
{
  trim (offset, length);
  drain ();
  assert_true (engine_known_clean (e, offset, length));
}

static void
assert_call (const struct mem_discard *c, uint64_t offset, uint64_t length)
{
  assert_int_equal (c->offset, offset);
  assert_int_equal (c->length, length);
}

static void
test_trim_over_clean_not_sent (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL);
  assert_false (engine_known_clean (e, 0, 64 * KiB));
  discard (0, 64 * KiB);
  assert_int_equal (calls (mem, c), 1);
  assert_int_equal (stats (e).clean_extents, 1);
  assert_int_equal (stats (e).clean_bytes, 64 * KiB);
  assert_true (stats (e).clean_memory_bytes > 0);
  /* Again, and a sub-granule piece of it: acknowledged, counted, not
   * recorded, not sent.
   */
  trim (0, 64 * KiB);
  trim (1000, 100);
  assert_int_equal (stats (e).pending_extents, 0);
  assert_int_equal (stats (e).already_clean_bytes, 64 * KiB + 100);
  assert_int_equal (stats (e).trims, 3);
  drain ();
  assert_int_equal (calls (mem, c), 1);
  assert_int_equal (stats (e).forwarded_bytes, 64 * KiB);
}

static void
test_partly_clean_records_the_rest (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL);
  discard (64 * KiB, 64 * KiB);
  discard (256 * KiB, 64 * KiB);
  /* [0, 384K) over clean [64K, 128K) and [256K, 320K). */
  trim (0, 384 * KiB);
  assert_int_equal (stats (e).already_clean_bytes, 128 * KiB);
  assert_int_equal (stats (e).pending_bytes, 256 * KiB);
  assert_int_equal (stats (e).pending_extents, 3);
  drain ();
  assert_int_equal (calls (mem, c), 5);
  assert_call (&c[2], 128 * KiB, 128 * KiB);        /* largest first */
  assert_call (&c[3], 0, 64 * KiB);
  assert_call (&c[4], 320 * KiB, 64 * KiB);
  /* All of it is clean now, as one extent. */
  assert_true (engine_known_clean (e, 0, 384 * KiB));
  assert_int_equal (stats (e).clean_extents, 1);
}

/* Invariant 1 with 9: a write inside a clean range makes its granule
 * dirty, so a later TRIM over it must reach the device.
 */
static void
test_write_makes_granules_dirty (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL);
  discard (0, 64 * KiB);
  fill (16 * KiB + 100, 512, 0xaa);             /* inside one granule */
  assert_false (engine_known_clean (e, 16 * KiB + 100, 512));
  assert_false (engine_known_clean (e, 16 * KiB, 4 * KiB));
  assert_true (engine_known_clean (e, 0, 16 * KiB));
  assert_true (engine_known_clean (e, 20 * KiB, 44 * KiB));
  assert_false (engine_known_clean (e, 0, 64 * KiB));
  assert_int_equal (stats (e).clean_bytes, 60 * KiB);
  trim (0, 64 * KiB);
  assert_int_equal (stats (e).already_clean_bytes, 60 * KiB);
  assert_int_equal (stats (e).pending_bytes, 4 * KiB);
  drain ();
  assert_int_equal (calls (mem, c), 2);
  assert_call (&c[1], 16 * KiB, 4 * KiB);       /* the whole granule */
  assert_true (mem->data[16 * KiB + 100] == 0);
  assert_true (engine_known_clean (e, 0, 64 * KiB));
}

/* Only what the backend discarded is clean: forwarded ranges are
 * aligned inward, their sub-granule heads and tails stay pending.
 */
static void
test_fragments_stay_pending (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL);
  trim (1 * KiB, 8 * KiB);
  drain ();
  assert_int_equal (calls (mem, c), 1);
  assert_true (engine_known_clean (e, 4 * KiB, 4 * KiB));
  assert_false (engine_known_clean (e, 1 * KiB, 3 * KiB));
  assert_false (engine_known_clean (e, 8 * KiB, 1 * KiB));
  assert_int_equal (stats (e).clean_bytes, 4 * KiB);
  /* The same TRIM again: the clean granule is counted, the fragments
   * merge with those still pending.
   */
  trim (1 * KiB, 8 * KiB);
  assert_int_equal (stats (e).already_clean_bytes, 4 * KiB);
  assert_int_equal (stats (e).pending_bytes, 4 * KiB);
  assert_int_equal (stats (e).subgranule_bytes, 4 * KiB);
  /* Neighbours complete the granules: those go out, and only those. */
  trim (0, 1 * KiB);
  trim (9 * KiB, 3 * KiB);
  drain ();
  assert_int_equal (calls (mem, c), 3);
  assert_true (engine_known_clean (e, 0, 12 * KiB));
}

/* A discard that fails is not clean; one that fails part way is clean
 * up to where it failed.
 */
static void
test_failed_and_partial_discards (void **state)
{
  static const char *const keys[] = { "max-discard", "64k", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys);
  trim (0, 256 * KiB);
  mem->fail_errno = EIO;
  mem->fail_count = 1;
  mem->fail_skip = 2;
  /* One pick is one chunk here: two go out, the third fails. */
  assert_int_equal (engine_drain (e, NULL, NULL), -1);
  assert_int_equal (calls (mem, c), 2);
  assert_true (engine_known_clean (e, 0, 128 * KiB));
  assert_false (engine_known_clean (e, 128 * KiB, 4 * KiB));
  assert_int_equal (stats (e).clean_bytes, 128 * KiB);
  assert_int_equal (stats (e).pending_bytes, 128 * KiB);
  drain ();
  assert_true (engine_known_clean (e, 0, 256 * KiB));
}

/* A discard of several chunks that fails in the middle (a FUA trim is
 * sent whole): the chunks sent before the error are clean.
 */
static void
test_partial_multi_chunk (void **state)
{
  static const char *const keys[] = { "max-discard", "64k", NULL };

  open_engine (keys);
  mem->fail_errno = EIO;
  mem->fail_count = 1;
  mem->fail_skip = 2;
  assert_int_equal (engine_trim (e, 0, 256 * KiB, true), 0);
  assert_int_equal (stats (e).forwarded_bytes, 128 * KiB);
  assert_true (engine_known_clean (e, 0, 128 * KiB));
  assert_false (engine_known_clean (e, 128 * KiB, 128 * KiB));
  assert_int_equal (stats (e).pending_bytes, 128 * KiB);
}

/* A FUA TRIM asks for a durable effect: it goes out even over clean
 * space.  Unaligned, only its whole granules become clean.
 */
static void
test_fua_always_sent (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL);
  assert_int_equal (engine_trim (e, 1000, 9000, true), 0);
  assert_int_equal (calls (mem, c), 1);
  /* The whole granule goes; the sub-granule edges stay pending. */
  assert_call (&c[0], 4 * KiB, 4 * KiB);
  assert_int_equal (stats (e).pending_bytes, 9000 - 4 * KiB);
  assert_true (engine_known_clean (e, 4 * KiB, 4 * KiB));
  assert_false (engine_known_clean (e, 1000, 100));
  assert_false (engine_known_clean (e, 8 * KiB, 4 * KiB));
  assert_int_equal (engine_trim (e, 4 * KiB, 4 * KiB, true), 0);
  assert_int_equal (calls (mem, c), 2);
}

/* passthrough=true is the plain-proxy baseline: every TRIM goes out. */
static void
test_passthrough_sends_every_trim (void **state)
{
  static const char *const keys[] = { "passthrough", "true", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys);
  trim (0, 64 * KiB);
  trim (0, 64 * KiB);
  assert_int_equal (calls (mem, c), 2);
  assert_false (engine_known_clean (e, 0, 64 * KiB));
  assert_int_equal (stats (e).max_clean_extents, 0);
  assert_int_equal (stats (e).already_clean_bytes, 0);
}

static void
test_off_sends_every_trim (void **state)
{
  static const char *const keys[] = { "max-clean-extents", "off", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys);
  trim (0, 64 * KiB);
  drain ();
  trim (0, 64 * KiB);
  drain ();
  assert_int_equal (calls (mem, c), 2);
  assert_false (engine_known_clean (e, 0, 64 * KiB));
  assert_int_equal (stats (e).clean_extents, 0);
  assert_int_equal (stats (e).clean_memory_bytes, 0);
}

/* A zero that may trim, on a backend whose zero deallocates as its
 * discard does, leaves clean granules; any other zero leaves dirty ones.
 */
static void
test_zeroes (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL);
  assert_int_equal (engine_zero (e, 1000, 64 * KiB, true, false, false), 0);
  assert_true (engine_known_clean (e, 4 * KiB, 60 * KiB - 4 * KiB));
  assert_false (engine_known_clean (e, 0, 4 * KiB));
  /* Without may_trim the blocks stay allocated: dirty. */
  assert_int_equal (engine_zero (e, 8 * KiB, 4 * KiB, false, false, false), 0);
  assert_false (engine_known_clean (e, 8 * KiB, 4 * KiB));
  trim (4 * KiB, 8 * KiB);
  assert_int_equal (stats (e).pending_bytes, 4 * KiB);
  assert_int_equal (stats (e).already_clean_bytes, 4 * KiB);
  drain ();
  assert_int_equal (calls (mem, c), 1);
  assert_call (&c[0], 8 * KiB, 4 * KiB);
  /* A backend whose zero does not say it unmaps: nothing is clean. */
  mem->b.limits.zero_unmaps = false;
  assert_int_equal (engine_zero (e, 1 * MiB, 64 * KiB, true, false, false), 0);
  assert_false (engine_known_clean (e, 1 * MiB, 4 * KiB));
}

static void
sleep_ms (unsigned ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

  nanosleep (&ts, NULL);
}

static void *
drain_thread (void *arg)
{
  engine_drain (e, NULL, NULL);
  return NULL;
}

/* A write that meets the discard of its range in flight waits for it;
 * the discard marks the range clean as it completes, and the write must
 * take its granule out again before it writes, or a later TRIM would be
 * skipped over the write's data.
 */
static void
test_write_racing_inflight_discard (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];
  pthread_t t;

  open_engine (NULL);
  mem->discard_delay_ms = 300;
  trim (0, 64 * KiB);
  assert_int_equal (pthread_create (&t, NULL, drain_thread, NULL), 0);
  sleep_ms (100);
  assert_int_equal (stats (e).inflight, 1);
  fill (8 * KiB, 4 * KiB, 0xcc);
  assert_int_equal (stats (e).write_waits, 1);
  pthread_join (t, NULL);
  assert_true (mem->data[8 * KiB] == 0xcc);
  assert_false (engine_known_clean (e, 8 * KiB, 4 * KiB));
  assert_true (engine_known_clean (e, 0, 8 * KiB));
  assert_true (engine_known_clean (e, 12 * KiB, 52 * KiB));
  mem->discard_delay_ms = 0;
  trim (0, 64 * KiB);
  drain ();
  assert_int_equal (calls (mem, c), 2);
  assert_call (&c[1], 8 * KiB, 4 * KiB);
}

/* At max-clean-extents the range marked clean longest ago is forgotten:
 * its next TRIM is sent again, nothing worse.
 */
static void
test_bound_forgets_oldest (void **state)
{
  static const char *const keys[] = { "max-clean-extents", "4", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys);
  for (int i = 0; i < 6; i++)
    discard (i * 128 * KiB, 64 * KiB);
  assert_int_equal (stats (e).clean_extents, 4);
  assert_int_equal (stats (e).clean_forgotten_bytes, 128 * KiB);
  assert_false (engine_known_clean (e, 0, 4 * KiB));
  assert_false (engine_known_clean (e, 128 * KiB, 4 * KiB));
  assert_true (engine_known_clean (e, 256 * KiB, 64 * KiB));
  trim (0, 64 * KiB);
  trim (640 * KiB, 64 * KiB);
  drain ();
  assert_int_equal (calls (mem, c), 7);
  assert_call (&c[6], 0, 64 * KiB);
  /* A write that splits an extent keeps the bound too. */
  fill (656 * KiB, 4 * KiB, 1);
  assert_true (stats (e).clean_extents <= 4);
}

static void
test_forget_clean (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];
  uint64_t extents, bytes;

  open_engine (NULL);
  discard (0, 64 * KiB);
  discard (1 * MiB, 128 * KiB);
  engine_forget_clean (e, &extents, &bytes);
  assert_int_equal (extents, 2);
  assert_int_equal (bytes, 192 * KiB);
  assert_int_equal (stats (e).clean_extents, 0);
  assert_false (engine_known_clean (e, 0, 4 * KiB));
  trim (0, 64 * KiB);
  drain ();
  assert_int_equal (calls (mem, c), 3);
  engine_forget_clean (e, NULL, NULL);
}

/* mkfs: a whole-device discard, sent in chunks, makes the whole device
 * known clean, as one extent.
 */
static void
test_whole_device (void **state)
{
  static const char *const keys[] = { "max-discard", "1M", NULL };
  uint64_t commands;

  open_engine (keys);
  trim (0, DISK);
  assert_int_equal (engine_drain (e, &commands, NULL), 0);
  assert_int_equal (commands, 4);
  assert_true (engine_known_clean (e, 0, DISK));
  assert_int_equal (stats (e).clean_extents, 1);
  trim (0, DISK);
  assert_int_equal (stats (e).already_clean_bytes, DISK);
  assert_int_equal (stats (e).pending_extents, 0);
}

/* The query itself: all of the range, never an empty one. */
static void
test_known_clean_query (void **state)
{
  open_engine (NULL);
  discard (64 * KiB, 64 * KiB);
  discard (192 * KiB, 64 * KiB);
  assert_true (engine_known_clean (e, 64 * KiB, 1));
  assert_true (engine_known_clean (e, 128 * KiB - 1, 1));
  assert_false (engine_known_clean (e, 64 * KiB - 1, 2));
  assert_false (engine_known_clean (e, 64 * KiB, 192 * KiB));
  assert_false (engine_known_clean (e, 64 * KiB, 0));
  assert_false (engine_known_clean (e, 0, 4 * KiB));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_teardown (name, teardown)
    T (test_trim_over_clean_not_sent),
    T (test_partly_clean_records_the_rest),
    T (test_write_makes_granules_dirty),
    T (test_fragments_stay_pending),
    T (test_failed_and_partial_discards),
    T (test_partial_multi_chunk),
    T (test_fua_always_sent),
    T (test_passthrough_sends_every_trim),
    T (test_off_sends_every_trim),
    T (test_zeroes),
    T (test_write_racing_inflight_discard),
    T (test_bound_forgets_oldest),
    T (test_forget_clean),
    T (test_whole_device),
    T (test_known_clean_query),
#undef T
  };

  return cmocka_run_group_tests_name ("clean", tests, NULL, NULL);
}
