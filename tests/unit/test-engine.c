/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of the engine against the in-memory backend:
 * cancellation, splitting, alignment, max-discard, delay, minlen,
 * on-full, FUA, passthrough, errors and the in-flight race.
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
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "engine-test.h"
#include "engine-util.h"
#include "mem-backend.h"

#define DISK (4 * MiB)

struct fixture {
  struct mem_backend *mem;
  struct engine *e;
};

static struct fixture fx;

static void
open_engine (const char *const *keys, uint32_t granularity,
             uint64_t max_discard)
{
  static const char *const defaults[] = { "delay", "0", "idle", "0", NULL };

  fx.mem = mem_backend_new (DISK, granularity, max_discard);
  fx.e = open_engine_on (fx.mem, defaults, keys);
}

static int
teardown (void **state)
{
  engine_close (fx.e);
  fx.e = NULL;
  return 0;
}

static void
fill (uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[DISK];

  memset (buf, byte, length);
  assert_int_equal (engine_pwrite (fx.e, buf, length, offset, false), 0);
}

static void
assert_filled (uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[DISK];

  assert_int_equal (engine_pread (fx.e, buf, length, offset), 0);
  for (uint32_t i = 0; i < length; i++)
    if (buf[i] != byte)
      fail_msg ("byte %u at offset %llu: %#x, expected %#x", i,
                (unsigned long long) offset + i, buf[i], byte);
}

static void
test_write_cancels_middle (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL, 4 * KiB, 64 * MiB);
  fill (0, 64 * KiB, 0xaa);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  assert_int_equal (stats (fx.e).pending_extents, 1);
  fill (16 * KiB, 4 * KiB, 0xbb);
  assert_int_equal (stats (fx.e).cancelled_by_writes, 4 * KiB);
  assert_int_equal (stats (fx.e).pending_extents, 2);
  assert_int_equal (stats (fx.e).pending_bytes, 60 * KiB);
  /* Pending ranges read as zeros (the backend still holds 0xaa). */
  assert_filled (0, 16 * KiB, 0);
  assert_filled (20 * KiB, 44 * KiB, 0);
  assert_true (fx.mem->data[0] == 0xaa);

  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_int_equal (calls (fx.mem, c), 2);
  assert_int_equal (c[0].offset, 20 * KiB);       /* largest first */
  assert_int_equal (c[0].length, 44 * KiB);
  assert_int_equal (c[1].offset, 0);
  assert_int_equal (c[1].length, 16 * KiB);
  assert_filled (16 * KiB, 4 * KiB, 0xbb);
  assert_filled (0, 16 * KiB, 0);
  assert_int_equal (stats (fx.e).forwarded, 2);
  assert_int_equal (stats (fx.e).forwarded_bytes, 60 * KiB);
  assert_int_equal (stats (fx.e).pending_extents, 0);
}

static void
test_pending_reads_zero (void **state)
{
  static unsigned char buf[64 * KiB];

  open_engine (NULL, 4 * KiB, 64 * MiB);
  fill (0, 64 * KiB, 0x11);
  assert_int_equal (engine_trim (fx.e, 1000, 3000, false), 0);
  assert_int_equal (engine_trim (fx.e, 40 * KiB, 100 * KiB, false), 0);
  assert_int_equal (engine_pread (fx.e, buf, 64 * KiB, 0), 0);
  for (uint32_t i = 0; i < 64 * KiB; i++) {
    bool pending = (i >= 1000 && i < 4000) || i >= 40 * KiB;

    if (buf[i] != (pending ? 0 : 0x11))
      fail_msg ("byte %u: %#x", i, buf[i]);
  }
  /* A write over part of it reads back at once. */
  fill (2 * KiB, 1 * KiB, 0x22);
  assert_filled (2 * KiB, 1 * KiB, 0x22);
  assert_filled (1000, 1048, 0);
}

static void
test_zero_cancels (void **state)
{
  open_engine (NULL, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_trim (fx.e, 0, 8 * KiB, false), 0);
  assert_int_equal (engine_zero (fx.e, 4 * KiB, 8 * KiB, false, false, false), 0);
  assert_int_equal (stats (fx.e).cancelled_by_zeroes, 4 * KiB);
  assert_int_equal (stats (fx.e).pending_bytes, 4 * KiB);
}

static void
test_merge_counts (void **state)
{
  open_engine (NULL, 4 * KiB, 64 * MiB);
  for (int i = 0; i < 16; i++)
    assert_int_equal (engine_trim (fx.e, i * 4 * KiB, 4 * KiB, false), 0);
  assert_int_equal (stats (fx.e).trims, 16);
  assert_int_equal (stats (fx.e).merges, 15);
  assert_int_equal (stats (fx.e).pending_extents, 1);
}

static void
test_alignment_keeps_fragments (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_trim (fx.e, 1 * KiB, 8 * KiB, false), 0);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_int_equal (calls (fx.mem, c), 1);
  assert_int_equal (c[0].offset, 4 * KiB);
  assert_int_equal (c[0].length, 4 * KiB);
  /* The head [1K,4K) and tail [8K,9K) wait for their neighbours. */
  assert_int_equal (stats (fx.e).pending_bytes, 4 * KiB);
  assert_int_equal (stats (fx.e).subgranule_bytes, 4 * KiB);
  assert_int_equal (engine_trim (fx.e, 0, 1 * KiB, false), 0);
  assert_int_equal (engine_trim (fx.e, 9 * KiB, 3 * KiB, false), 0);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_int_equal (calls (fx.mem, c), 3);
  assert_int_equal (stats (fx.e).pending_bytes, 0);
  assert_int_equal (stats (fx.e).forwarded_bytes, 12 * KiB);
}

/* The largest extent may hold no whole granule while a shorter one,
 * placed better, does: that one goes.  With fragments alone, nothing.
 */
static void
test_shorter_extent_holding_a_granule_goes (void **state)
{
  static const char *const keys[] = { "granularity", "64k", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_trim (fx.e, 10 * KiB, 100 * KiB, false), 0);
  assert_int_equal (engine_trim (fx.e, 200 * KiB, 8 * KiB, false), 0);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_int_equal (calls (fx.mem, c), 0);
  assert_int_equal (engine_trim (fx.e, 256 * KiB, 64 * KiB, false), 0);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_int_equal (calls (fx.mem, c), 1);
  assert_int_equal (c[0].offset, 256 * KiB);
  assert_int_equal (c[0].length, 64 * KiB);
  assert_int_equal (stats (fx.e).pending_bytes, 108 * KiB);
}

static void
test_granularity_key_coarsens (void **state)
{
  static const char *const keys[] = { "granularity", "64k", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_trim (fx.e, 4 * KiB, 200 * KiB, false), 0);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_int_equal (calls (fx.mem, c), 1);
  assert_int_equal (c[0].offset, 64 * KiB);
  assert_int_equal (c[0].length, 128 * KiB);
}

static void
test_granularity_below_backend_refused (void **state)
{
  static const char *const keys[] = { "granularity", "4k", NULL };
  struct mem_backend *m = mem_backend_new (DISK, 64 * KiB, 64 * MiB);

  assert_null (try_open_engine_on (m, NULL, keys));
  assert_int_equal (errno, EINVAL);
}

static void
test_max_discard_splits (void **state)
{
  static const char *const keys[] = { "max-discard", "64k", NULL };
  struct mem_discard c[MEM_MAX_CALLS];
  uint64_t commands, bytes;

  open_engine (keys, 4 * KiB, 1 * MiB);
  assert_int_equal (engine_trim (fx.e, 0, 256 * KiB, false), 0);
  assert_int_equal (engine_drain (fx.e, &commands, &bytes), 0);
  assert_int_equal (commands, 4);
  assert_int_equal (bytes, 256 * KiB);
  assert_int_equal (calls (fx.mem, c), 4);
  for (int i = 0; i < 4; i++)
    assert_int_equal (c[i].length, 64 * KiB);
}

static void
sleep_ms (unsigned ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

  nanosleep (&ts, NULL);
}

/* Poll up to timeout_ms for the backend to have seen n discards. */
static unsigned
wait_calls (unsigned n, unsigned timeout_ms)
{
  struct mem_discard c[MEM_MAX_CALLS];
  unsigned got = 0;

  for (unsigned t = 0;; t += 10) {
    if ((got = calls (fx.mem, c)) >= n || t >= timeout_ms)
      return got;
    sleep_ms (10);
  }
}

/* Poll up to timeout_ms for the engine to have forwarded bytes bytes
 * (pacing may send an extent in several commands).
 */
static uint64_t
wait_forwarded (uint64_t bytes, unsigned timeout_ms)
{
  uint64_t got;

  for (unsigned t = 0;; t += 10) {
    if ((got = stats (fx.e).forwarded_bytes) >= bytes || t >= timeout_ms)
      return got;
    sleep_ms (10);
  }
}

static void
test_delay_holds_back (void **state)
{
  static const char *const keys[] = { "delay", "400ms", NULL };

  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_start (fx.e), 0);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  sleep_ms (150);
  assert_int_equal (wait_calls (1, 0), 0);
  assert_int_equal (wait_calls (1, 3000), 1);
  assert_int_equal (stats (fx.e).pending_extents, 0);
}

static void
test_idle_holds_back (void **state)
{
  static const char *const keys[] = {
    "idle", "300ms", "budget", "off", NULL,   /* idle gating: no pacing */
  };

  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_start (fx.e), 0);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  /* Keep the client busy: no discard may go out meanwhile. */
  for (int i = 0; i < 10; i++) {
    fill (1 * MiB, 4 * KiB, i);
    sleep_ms (50);
  }
  assert_int_equal (wait_calls (1, 0), 0);
  assert_int_equal (wait_calls (1, 3000), 1);
}

static void
test_minlen_skips_short (void **state)
{
  static const char *const keys[] = { "minlen", "64k", NULL };

  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_start (fx.e), 0);
  assert_int_equal (engine_trim (fx.e, 0, 8 * KiB, false), 0);
  sleep_ms (300);
  assert_int_equal (wait_calls (1, 0), 0);
  assert_int_equal (engine_trim (fx.e, 1 * MiB, 128 * KiB, false), 0);
  assert_int_equal (wait_forwarded (128 * KiB, 3000), 128 * KiB);
  sleep_ms (200);
  assert_int_equal (stats (fx.e).forwarded_bytes, 128 * KiB);
  assert_int_equal (stats (fx.e).pending_bytes, 8 * KiB);
  /* An explicit drain ignores minlen. */
  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_int_equal (stats (fx.e).pending_bytes, 0);
}

static void
test_rate_limits (void **state)
{
  static const char *const keys[] = {
    "rate", "5", "budget", "off", NULL,       /* rate= is for no pacing */
  };

  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_start (fx.e), 0);
  for (int i = 0; i < 20; i++)
    assert_int_equal (engine_trim (fx.e, i * 64 * KiB, 4 * KiB, false), 0);
  sleep_ms (1000);
  /* 5 per second: about 5 or 6 in the first second, never all 20. */
  unsigned n = wait_calls (20, 0);
  assert_in_range (n, 3, 8);
}

static void
test_on_full_forward (void **state)
{
  static const char *const keys[] = { "max-extents", "4", "delay", "1h", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys, 4 * KiB, 64 * MiB);
  for (int i = 0; i < 6; i++)
    assert_int_equal (engine_trim (fx.e, i * 64 * KiB, 4 * KiB, false), 0);
  assert_int_equal (stats (fx.e).pending_extents, 4);
  assert_int_equal (calls (fx.mem, c), 2);
  assert_int_equal (c[0].offset, 0);             /* oldest first */
  assert_int_equal (c[1].offset, 64 * KiB);
  assert_int_equal (stats (fx.e).dropped, 0);
}

static void
test_on_full_drop (void **state)
{
  static const char *const keys[] = {
    "max-extents", "4", "on-full", "drop", "delay", "1h", NULL
  };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys, 4 * KiB, 64 * MiB);
  for (int i = 0; i < 6; i++)
    assert_int_equal (engine_trim (fx.e, i * 64 * KiB, 4 * KiB, false), 0);
  assert_int_equal (stats (fx.e).pending_extents, 4);
  assert_int_equal (calls (fx.mem, c), 0);
  assert_int_equal (stats (fx.e).dropped, 2);
  assert_int_equal (stats (fx.e).dropped_full_bytes, 8 * KiB);
}

static void
test_fua_trim_forwards_at_once (void **state)
{
  static const char *const keys[] = { "delay", "1h", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  assert_int_equal (engine_trim (fx.e, 32 * KiB, 64 * KiB, true), 0);
  assert_int_equal (calls (fx.mem, c), 1);
  assert_int_equal (c[0].offset, 32 * KiB);
  assert_int_equal (c[0].length, 64 * KiB);
  assert_true (c[0].fua);
  assert_int_equal (stats (fx.e).pending_bytes, 32 * KiB);
}

static void
test_passthrough (void **state)
{
  static const char *const keys[] = { "passthrough", "true", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys, 4 * KiB, 64 * MiB);
  /* Invariant 2: what the backend cannot discard is counted, not sent
   * (a block device would cut it away and report success).
   */
  assert_int_equal (engine_trim (fx.e, 512, 1024, false), 0);
  assert_int_equal (calls (fx.mem, c), 0);
  assert_int_equal (stats (fx.e).dropped_fragment_bytes, 1024);
  assert_int_equal (engine_trim (fx.e, 1024, 12 * KiB, false), 0);
  assert_int_equal (calls (fx.mem, c), 1);
  assert_int_equal (c[0].offset, 4 * KiB);
  assert_int_equal (c[0].length, 8 * KiB);
  assert_int_equal (stats (fx.e).forwarded_bytes, 8 * KiB);
  assert_int_equal (stats (fx.e).dropped_fragment_bytes, 1024 + 4 * KiB);
  assert_int_equal (stats (fx.e).pending_extents, 0);
  fx.mem->fail_errno = EIO;
  fx.mem->fail_count = 1;
  assert_int_equal (engine_trim (fx.e, 0, 4096, false), -1);
  assert_int_equal (errno, EIO);
}

/* A FUA trim sends its whole granules at once and keeps its sub-granule
 * edges pending, where they may merge into whole granules (invariant 2).
 */
static void
test_fua_edges_kept (void **state)
{
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (NULL, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_trim (fx.e, 1024, 12 * KiB, true), 0);
  assert_int_equal (calls (fx.mem, c), 1);
  assert_int_equal (c[0].offset, 4 * KiB);
  assert_int_equal (c[0].length, 8 * KiB);
  assert_int_equal (stats (fx.e).pending_bytes, 3 * KiB + 1024);
  assert_int_equal (stats (fx.e).dropped_bytes, 0);
}

/* 64 KiB pending at 0, and the next count discards fail with err. */
static void
pending_then_failing (const char *const *keys, int err, unsigned count)
{
  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  fx.mem->fail_errno = err;
  fx.mem->fail_count = count;
}

static void
test_transient_error_keeps_pending (void **state)
{
  pending_then_failing (NULL, EIO, 1);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), -1);
  assert_int_equal (stats (fx.e).pending_bytes, 64 * KiB);
  assert_int_equal (stats (fx.e).forward_errors, 1);
  assert_int_equal (stats (fx.e).last_error, EIO);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_int_equal (stats (fx.e).pending_bytes, 0);
  assert_int_equal (stats (fx.e).forwarded_bytes, 64 * KiB);
}

static void
test_flusher_retries_after_error (void **state)
{
  open_engine (NULL, 4 * KiB, 64 * MiB);
  fx.mem->fail_errno = EIO;
  fx.mem->fail_count = 2;
  assert_int_equal (engine_start (fx.e), 0);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  assert_int_equal (wait_calls (1, 5000), 1);
  assert_int_equal (stats (fx.e).forward_errors, 2);
  assert_int_equal (stats (fx.e).pending_bytes, 0);
}

/* At stop, a discard that fails now and then is sent again after the
 * backoff, until the deadline, rather than left behind at the first
 * error.
 */
static void
test_stop_retries_after_error (void **state)
{
  pending_then_failing (NULL, EIO, 3);
  assert_int_equal (engine_trim (fx.e, 1 * MiB, 64 * KiB, false), 0);
  engine_stop (fx.e, 10000);
  assert_int_equal (stats (fx.e).forward_errors, 3);
  assert_int_equal (stats (fx.e).pending_bytes, 0);
  assert_int_equal (stats (fx.e).forwarded_bytes, 128 * KiB);
}

/* While the discard is in flight (the engine lock is down), time passes
 * the rebase point and a trim elsewhere takes the ticks: they are
 * rebased then, with the failing discard out of the map.
 */
static void
rebase_during_discard (void *opaque)
{
  clock_ns += MS (20);
  fx.mem->on_discard = NULL;
  assert_int_equal (engine_trim (fx.e, 2 * MiB, 4 * KiB, false), 0);
}

/* A discard that fails while the ticks are rebased goes back into the
 * map in the new epoch: its age is the 20 ms that passed, not minus the
 * rebase (about 12 days of waiting: the flusher would not look at it).
 */
static void
test_failed_discard_across_rebase (void **state)
{
  struct extent x[4];
  uint32_t now;

  open_engine (NULL, 4 * KiB, 64 * MiB);
  use_virtual_clock (fx.e);
  /* Ticks are rebased at 2^31 ms. */
  clock_ns += MS ((UINT64_C (1) << 31) - 10);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  fx.mem->fail_errno = EIO;
  fx.mem->fail_count = 1;
  fx.mem->on_discard = rebase_during_discard;
  assert_int_equal (engine_drain (fx.e, NULL, NULL), -1);
  assert_int_equal (engine_dump_batch (fx.e, 0, x, 4, &now), 2);
  assert_int_equal (x[0].offset, 0);
  assert_int_equal (x[0].length, 64 * KiB);
  assert_true (now < (UINT32_C (1) << 31));
  if (x[0].time > now || now - x[0].time != 20)
    fail_msg ("the failed discard is back at tick %u, now %u: age %d ms, "
              "not 20", x[0].time, now, (int) (now - x[0].time));
}

/* The reproducer: minlen=64k delay=1s idle=0, a trim of 8 KiB,
 * 0.5 s later one of 128 KiB.  The short one comes of age first and can
 * never go; the long one must still go when its second has passed,
 * without any further input.
 */
static void
test_minlen_no_further_input (void **state)
{
  static const char *const keys[] = { "minlen", "64k", "delay", "1s", NULL };
  struct mem_discard c[MEM_MAX_CALLS];

  open_engine (keys, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_start (fx.e), 0);
  assert_int_equal (engine_trim (fx.e, 0, 8 * KiB, false), 0);
  sleep_ms (500);
  assert_int_equal (engine_trim (fx.e, 1 * MiB, 128 * KiB, false), 0);
  sleep_ms (900);
  assert_int_equal (wait_calls (1, 0), 0);
  assert_int_equal (wait_forwarded (128 * KiB, 3000), 128 * KiB);
  /* In one command or a few (the pacing probes small ones first). */
  assert_true (calls (fx.mem, c) >= 1);
  assert_int_equal (c[0].offset, 1 * MiB);
  assert_int_equal (stats (fx.e).pending_bytes, 8 * KiB);
}

/* EINVAL: the store refuses the request as such; retrying cannot help,
 * so the range is dropped and counted, not kept.
 */
static void
test_einval_drops (void **state)
{
  pending_then_failing (NULL, EINVAL, 1);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), -1);
  assert_int_equal (stats (fx.e).pending_bytes, 0);
  assert_int_equal (stats (fx.e).forward_errors, 1);
  assert_int_equal (stats (fx.e).last_error, EINVAL);
  assert_int_equal (stats (fx.e).dropped_error_bytes, 64 * KiB);
  assert_true (stats (fx.e).discard_supported);
}

/* flush-discards: a failing discard stays pending but does not fail the
 * client's FLUSH (its writes are durable all the same).
 */
static void
test_flush_discards_error_not_fatal (void **state)
{
  static const char *const keys[] = { "flush-discards", "true", NULL };

  pending_then_failing (keys, EIO, 1);
  assert_int_equal (engine_flush (fx.e), 0);
  assert_int_equal (stats (fx.e).forward_errors, 1);
  assert_int_equal (stats (fx.e).pending_bytes, 64 * KiB);
  assert_int_equal (engine_flush (fx.e), 0);
  assert_int_equal (stats (fx.e).pending_bytes, 0);
}

static void
test_unsupported_turns_off (void **state)
{
  pending_then_failing (NULL, EOPNOTSUPP, 1);
  assert_int_equal (engine_drain (fx.e, NULL, NULL), 0);
  assert_false (stats (fx.e).discard_supported);
  assert_int_equal (stats (fx.e).pending_bytes, 0);
  assert_int_equal (stats (fx.e).dropped_unsupported_bytes, 64 * KiB);
  assert_int_equal (engine_trim (fx.e, 0, 4 * KiB, false), 0);
  assert_int_equal (stats (fx.e).dropped_unsupported_bytes, 68 * KiB);
}

static void
test_pause_holds_back (void **state)
{
  open_engine (NULL, 4 * KiB, 64 * MiB);
  engine_pause (fx.e, true);
  assert_int_equal (engine_start (fx.e), 0);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  sleep_ms (300);
  assert_int_equal (wait_calls (1, 0), 0);
  engine_pause (fx.e, false);
  assert_int_equal (wait_calls (1, 3000), 1);
}

static void
test_runtime_set (void **state)
{
  open_engine (NULL, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_set (fx.e, "delay", "5s"), 0);
  assert_int_equal (engine_set (fx.e, "delay", "soon"), -1);
  assert_int_equal (errno, EINVAL);
  assert_int_equal (engine_set (fx.e, "granularity", "4k"), -1);
}

static void
test_out_of_range_refused (void **state)
{
  open_engine (NULL, 4 * KiB, 64 * MiB);
  assert_int_equal (engine_trim (fx.e, DISK - 4096, 8192, false), -1);
  assert_int_equal (errno, EINVAL);
  assert_int_equal (engine_trim (fx.e, UINT64_MAX - 10, 4096, false), -1);
  assert_int_equal (stats (fx.e).trims, 0);
}

/* The race of invariant 1: a write arriving while a discard of the same
 * range is in flight waits for it, so its data survives.
 */
static void *
drain_thread (void *arg)
{
  engine_drain (fx.e, NULL, NULL);
  return NULL;
}

static void
test_write_waits_for_inflight (void **state)
{
  pthread_t t;

  open_engine (NULL, 4 * KiB, 64 * MiB);
  fx.mem->discard_delay_ms = 300;
  fill (0, 64 * KiB, 0x55);
  assert_int_equal (engine_trim (fx.e, 0, 64 * KiB, false), 0);
  assert_int_equal (pthread_create (&t, NULL, drain_thread, NULL), 0);
  sleep_ms (100);
  assert_int_equal (stats (fx.e).inflight, 1);
  /* In flight, the backend still holds 0x55; the read says zeros. */
  assert_true (fx.mem->data[16 * KiB] == 0x55);
  assert_filled (16 * KiB, 4 * KiB, 0);
  fill (8 * KiB, 4 * KiB, 0xcc);
  assert_int_equal (stats (fx.e).write_waits, 1);
  pthread_join (t, NULL);
  assert_filled (8 * KiB, 4 * KiB, 0xcc);
  assert_filled (0, 8 * KiB, 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_teardown (name, teardown)
    T (test_write_cancels_middle),
    T (test_pending_reads_zero),
    T (test_zero_cancels),
    T (test_merge_counts),
    T (test_alignment_keeps_fragments),
    T (test_shorter_extent_holding_a_granule_goes),
    T (test_granularity_key_coarsens),
    cmocka_unit_test (test_granularity_below_backend_refused),
    T (test_max_discard_splits),
    T (test_delay_holds_back),
    T (test_idle_holds_back),
    T (test_minlen_skips_short),
    T (test_minlen_no_further_input),
    T (test_rate_limits),
    T (test_on_full_forward),
    T (test_on_full_drop),
    T (test_fua_trim_forwards_at_once),
    T (test_passthrough),
    T (test_fua_edges_kept),
    T (test_transient_error_keeps_pending),
    T (test_flusher_retries_after_error),
    T (test_stop_retries_after_error),
    T (test_failed_discard_across_rebase),
    T (test_einval_drops),
    T (test_flush_discards_error_not_fatal),
    T (test_unsupported_turns_off),
    T (test_pause_holds_back),
    T (test_runtime_set),
    T (test_out_of_range_refused),
    T (test_write_waits_for_inflight),
#undef T
  };

  return cmocka_run_group_tests_name ("engine", tests, NULL, NULL);
}
