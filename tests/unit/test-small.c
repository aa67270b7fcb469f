/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of the small-extent policy and the bounded
 * stop (cache/policy/small.c, cache/engine/engine-small.c): the auto threshold from the cost model, held
 * extents released by a merge or an explicit flush and never by the
 * flusher alone, joins across known-clean gaps only, and a stop that
 * keeps its deadline and counts what it leaves.  The in-memory backend
 * on a virtual clock: each discard costs DISCARD_MS of it.
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine.h"
#include "engine-test.h"
#include "engine-util.h"
#include "mem-backend.h"
#include "small.h"

#define DISK (64 * MiB)
#define DISCARD_MS 5

static struct mem_backend *mem;
static struct engine *e;

/* The device model of issue 23: 5 ms a discard, whatever its size. */
static void
discard_takes_time (void *opaque)
{
  clock_ns += MS (DISCARD_MS);
}

static void
open_engine (const char *const *keys)
{
  static const char *const defaults[] = {
    "delay", "0", "idle", "0", "budget", "off", NULL,
  };

  mem = mem_backend_new (DISK, 4 * KiB, 64 * MiB);
  e = open_engine_on (mem, defaults, keys);
  use_virtual_clock (e);
  mem->on_discard = discard_takes_time;
}

static int
teardown (void **state)
{
  engine_close (e);
  e = NULL;
  return 0;
}

/* Step the flusher as its thread would until it says only input can
 * give it work; fails on a turn that asks to run again at once having
 * done nothing (a spin).
 */
static void
settle (void)
{
  for (unsigned turns = 0; turns < 100000; turns++) {
    uint64_t before = stats (e).forwarded, at = engine_flusher_step (e);

    if (at == ENGINE_FLUSHER_IDLE)
      return;
    if (at <= clock_ns && stats (e).forwarded == before)
      fail_msg ("the flusher spins: it asked to run again at once "
                "without forwarding");
    if (at > clock_ns)
      clock_ns = at;
  }
  fail_msg ("the flusher never settled");
}

static void
trim (uint64_t offset, uint64_t length)
{
  assert_int_equal (engine_trim (e, offset, length, false), 0);
}

/* An explicit flush, as discardctl flush asks the flusher for one. */
static void
explicit_flush (void)
{
  struct engine_flush f;
  struct engine_flush_progress p;

  engine_flush_begin (e, &f);
  for (unsigned turns = 0; engine_flush_wait (e, &f, 0, &p) != 1; turns++) {
    assert_true (turns < 100000);
    engine_flusher_step (e);
  }
}

static void
test_auto_threshold (void **state)
{
  struct pace_model m = { .valid = true, .samples = 64, .a_us = 5000 };

  /* Constant 5 ms a command: the cap. */
  assert_int_equal (small_auto_threshold (&m, 4096), SMALL_AUTO_MAX);
  /* The bytes cost as much as the command at 20,000 bytes: hold below
   * that, as a power of two.
   */
  m.b_us_per_byte = 5000.0 / 20000;
  assert_int_equal (small_auto_threshold (&m, 4096), 16384);
  assert_int_equal (small_auto_threshold (&m, 32768), 32768);
  /* Bytes dominate from the first granule on: hold nothing below it. */
  m.b_us_per_byte = 5000.0 / 100;
  assert_int_equal (small_auto_threshold (&m, 4096), 4096);
  /* A cheap command, too few samples, no model: hold nothing. */
  m = (struct pace_model) { .valid = true, .samples = 64, .a_us = 200 };
  assert_int_equal (small_auto_threshold (&m, 4096), 0);
  m = (struct pace_model) { .valid = true, .samples = 7, .a_us = 5000 };
  assert_int_equal (small_auto_threshold (&m, 4096), 0);
  m = (struct pace_model) { 0 };
  assert_int_equal (small_auto_threshold (&m, 4096), 0);
}

/* small=64k: the flusher sends the large extent, holds the small one
 * (and then sleeps: it is not forwardable by policy), sends it once a
 * neighbour's trim makes it large, and an explicit flush sends the
 * small ones left.
 */
static void
test_hold_until_merge_or_flush (void **state)
{
  static const char *const keys[] = { "small", "64k", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys);
  assert_int_equal (stats (e).small_len, 64 * KiB);
  trim (0, 16 * KiB);
  trim (1 * MiB, 128 * KiB);
  settle ();
  assert_int_equal (calls (mem, c), 1);
  assert_int_equal (c[0].offset, 1 * MiB);
  assert_int_equal (stats (e).pending_bytes, 16 * KiB);

  trim (16 * KiB, 48 * KiB);          /* now [0, 64k): not small */
  settle ();
  assert_int_equal (calls (mem, c), 2);
  assert_int_equal (c[1].offset, 0);
  assert_int_equal (c[1].length, 64 * KiB);

  trim (4 * MiB, 8 * KiB);
  trim (8 * MiB, 60 * KiB);
  settle ();
  assert_int_equal (calls (mem, c), 2);
  assert_int_equal (stats (e).pending_extents, 2);
  explicit_flush ();
  assert_int_equal (calls (mem, c), 4);
  assert_int_equal (stats (e).pending_extents, 0);
  assert_int_equal (engine_drain (e, NULL, NULL), 0);
}

/* small=auto on the 5 ms device: nothing is held until the model is
 * known; then 64 KiB (the cap: the command is the whole cost).
 */
static void
test_auto_learns_from_the_device (void **state)
{
  open_engine (NULL);
  for (unsigned i = 0; i < SMALL_AUTO_MIN_SAMPLES; i++)
    trim (i * MiB, 4 * KiB * (i + 1));
  settle ();
  assert_int_equal (stats (e).forwarded, SMALL_AUTO_MIN_SAMPLES);
  assert_int_equal (stats (e).small_len, SMALL_AUTO_MAX);
  trim (32 * MiB, 16 * KiB);
  trim (40 * MiB, 256 * KiB);
  settle ();
  assert_int_equal (stats (e).forwarded, SMALL_AUTO_MIN_SAMPLES + 1);
  assert_int_equal (stats (e).pending_bytes, 16 * KiB);
}

/* small=off, stop-timeout's job alone: 1,000 extents of 32 KiB at 5 ms
 * a discard would take 5 s; a stop given 100 ms sends about 20, largest
 * first, and counts the rest as dropped.
 */
static void
test_stop_keeps_its_deadline (void **state)
{
  static const char *const keys[] = { "small", "off", NULL };
  uint64_t start;
  struct engine_stats st;

  open_engine (keys);
  for (unsigned i = 0; i < 1000; i++)
    trim (i * 64 * KiB, i == 500 ? 48 * KiB : 32 * KiB);
  /* The one larger extent goes first. */
  start = clock_ns;
  engine_stop (e, 100);
  st = stats (e);
  if (clock_ns - start > MS (100 + DISCARD_MS))
    fail_msg ("the stop took %.3f s of the device's time, bound 0.1 s",
              (clock_ns - start) / 1e9);
  assert_in_range (st.forwarded, 19, 21);
  assert_int_equal (mem->calls[0].length, 48 * KiB);
  assert_int_equal (st.pending_extents, 0);
  assert_int_equal (st.dropped, 1000 - st.forwarded);
  assert_int_equal (st.dropped_stop_bytes, st.dropped_bytes);
  assert_int_equal (st.dropped_stop_bytes + st.forwarded_bytes,
                    999 * 32 * KiB + 48 * KiB);
  assert_int_equal (st.dropped_small_bytes, 0);
}

/* A stop without state= does not send what small= holds: counted as
 * dropped_small_bytes; the large ones go; fragments stay, as after a
 * flush.
 */
static void
test_stop_leaves_held_extents_counted (void **state)
{
  static const char *const keys[] = { "small", "64k", NULL };
  struct engine_stats st;

  open_engine (keys);
  for (unsigned i = 0; i < 10; i++) {
    trim (i * MiB, 128 * KiB);
    trim (i * MiB + 512 * KiB, 16 * KiB);
  }
  trim (20 * MiB + 1024, 1024);        /* a fragment */
  engine_stop (e, 60000);
  st = stats (e);
  assert_int_equal (st.forwarded, 10);
  assert_int_equal (st.dropped_small_bytes, 10 * 16 * KiB);
  assert_int_equal (st.dropped_stop_bytes, 0);
  assert_int_equal (st.pending_extents, 1);
  assert_int_equal (st.subgranule_bytes, 1024);
}

/* Make the model known: SMALL_AUTO_MIN_SAMPLES discards far away. */
static void
learn (void)
{
  for (unsigned i = 0; i < SMALL_AUTO_MIN_SAMPLES; i++)
    trim (32 * MiB + i * MiB, 64 * KiB);
  assert_int_equal (engine_drain (e, NULL, NULL), 0);
}

/* An explicit flush joins two small extents across a gap the backend
 * knows clean: one command; across a gap written since, two.
 */
static void
test_join_only_across_clean (void **state)
{
  static const char *const keys[] = { "small", "off", NULL };
  static unsigned char data[4 * KiB];
  struct mem_discard c[MEM_MAX_CALLS];
  unsigned n;

  open_engine (keys);
  learn ();
  /* [64k, 128k) and [512k, 576k) discarded: clean. */
  trim (64 * KiB, 64 * KiB);
  trim (512 * KiB, 64 * KiB);
  assert_int_equal (engine_drain (e, NULL, NULL), 0);
  n = calls (mem, c);
  /* [540k, 544k) written since: no longer clean. */
  memset (data, 0x5a, sizeof data);
  assert_int_equal (engine_pwrite (e, data, sizeof data, 540 * KiB, false),
                    0);
  trim (32 * KiB, 32 * KiB);
  trim (128 * KiB, 16 * KiB);
  trim (496 * KiB, 16 * KiB);
  trim (576 * KiB, 16 * KiB);
  explicit_flush ();
  assert_int_equal (calls (mem, c), n + 3);
  assert_int_equal (c[n].offset, 32 * KiB);
  assert_int_equal (c[n].length, 112 * KiB);
  assert_int_equal (c[n + 1].offset, 496 * KiB);
  assert_int_equal (c[n + 1].length, 16 * KiB);
  assert_int_equal (stats (e).joins, 1);
  assert_int_equal (stats (e).joined_clean_bytes, 64 * KiB);
  assert_int_equal (stats (e).pending_extents, 0);
  for (unsigned i = 0; i < 4 * KiB; i++)
    if (mem->data[540 * KiB + i] != 0x5a)
      fail_msg ("byte %u of the write in the gap was discarded", i);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_auto_threshold),
    cmocka_unit_test_teardown (test_hold_until_merge_or_flush, teardown),
    cmocka_unit_test_teardown (test_auto_learns_from_the_device, teardown),
    cmocka_unit_test_teardown (test_stop_keeps_its_deadline, teardown),
    cmocka_unit_test_teardown (test_stop_leaves_held_extents_counted,
                               teardown),
    cmocka_unit_test_teardown (test_join_only_across_clean, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
