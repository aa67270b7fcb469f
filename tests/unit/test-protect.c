/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of invariant 11: the circuit breaker's state
 * machine (errors, latency, probes and their backoff, closing by hand),
 * the windows' parser and arithmetic, and in the engine: an open
 * breaker holds the flusher and drops (counted) at max-extents, a probe
 * closes it, the stop probes again after a failed probe; a closed window
 * holds the flusher except under pressure; a write between a discard
 * and its proof check voids the sample.
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "breaker.h"
#include "engine.h"
#include "engine-test.h"
#include "engine-util.h"
#include "mem-backend.h"
#include "window.h"

static const struct breaker_config cfg = {
  .errors = 3, .latency_ms = 100, .window_ms = 1000, .backoff_ms = 1000,
};

static void
test_breaker_errors (void **state)
{
  struct breaker b;
  uint64_t at;

  breaker_init (&b);
  breaker_record (&b, &cfg, MS (0), MS (1), EIO, false);
  breaker_record (&b, &cfg, MS (1), MS (2), EIO, false);
  breaker_record (&b, &cfg, MS (2), MS (3), 0, false);   /* resets */
  breaker_record (&b, &cfg, MS (3), MS (4), EIO, false);
  breaker_record (&b, &cfg, MS (4), MS (5), EIO, false);
  assert_false (breaker_holds (&b));
  breaker_record (&b, &cfg, MS (5), MS (6), EIO, false);
  assert_true (breaker_holds (&b));
  assert_int_equal (b.reason, BREAKER_REASON_ERRORS);
  assert_int_equal (b.opened, 1);
  /* Held until the backoff; then one probe, and only one. */
  assert_false (breaker_probe_due (&b, MS (500), &at));
  assert_int_equal (at, MS (1006));
  assert_true (breaker_probe_due (&b, MS (1006), &at));
  breaker_probe_begin (&b);
  assert_false (breaker_probe_due (&b, MS (5000), &at));
  assert_int_equal (at, UINT64_MAX);
  /* A stale success (not the probe) closes nothing. */
  breaker_record (&b, &cfg, MS (900), MS (1010), 0, false);
  assert_int_equal (b.state, BREAKER_PROBING);
  /* A failed probe doubles the wait. */
  breaker_record (&b, &cfg, MS (1006), MS (1010), EIO, true);
  assert_int_equal (b.state, BREAKER_OPEN);
  assert_int_equal (b.next_probe_ns, MS (1010 + 2000));
  assert_true (breaker_probe_due (&b, MS (3010), &at));
  breaker_probe_begin (&b);
  breaker_record (&b, &cfg, MS (3010), MS (3011), 0, true);
  assert_int_equal (b.state, BREAKER_CLOSED);
  assert_int_equal (b.probes, 2);
  assert_int_equal (b.opened, 1);
}

static void
test_breaker_backoff_cap (void **state)
{
  struct breaker b;
  uint64_t now = MS (10), at;

  breaker_init (&b);
  for (int i = 0; i < 3; i++)
    breaker_record (&b, &cfg, now, now, EIO, false);
  for (int i = 0; i < 20; i++) {
    now = b.next_probe_ns;
    assert_true (breaker_probe_due (&b, now, &at));
    breaker_probe_begin (&b);
    breaker_record (&b, &cfg, now, now, EIO, true);
  }
  assert_int_equal (b.backoff_ms, BREAKER_MAX_BACKOFF_MS);
  assert_int_equal (b.next_probe_ns - now, MS (BREAKER_MAX_BACKOFF_MS));
}

static void
test_breaker_latency (void **state)
{
  struct breaker b;
  uint64_t at;

  breaker_init (&b);
  /* Slow, slow, fast: the run restarts. */
  breaker_record (&b, &cfg, MS (0), MS (400), 0, false);
  breaker_record (&b, &cfg, MS (400), MS (800), 0, false);
  breaker_record (&b, &cfg, MS (800), MS (850), 0, false);
  breaker_record (&b, &cfg, MS (850), MS (1250), 0, false);
  breaker_record (&b, &cfg, MS (1250), MS (1650), 0, false);
  assert_false (breaker_holds (&b));
  /* Slow from 850 to 1850: a whole window. */
  breaker_record (&b, &cfg, MS (1650), MS (1850), 0, false);
  assert_true (breaker_holds (&b));
  assert_int_equal (b.reason, BREAKER_REASON_LATENCY);
  /* A slow probe keeps it open; a fast one closes it. */
  assert_true (breaker_probe_due (&b, MS (2850), &at));
  breaker_probe_begin (&b);
  breaker_record (&b, &cfg, MS (2850), MS (3000), 0, true);
  assert_int_equal (b.state, BREAKER_OPEN);
  assert_true (breaker_probe_due (&b, MS (5000), &at));
  breaker_probe_begin (&b);
  breaker_record (&b, &cfg, MS (5000), MS (5010), 0, true);
  assert_int_equal (b.state, BREAKER_CLOSED);
}

static void
test_breaker_close_by_hand (void **state)
{
  struct breaker b;

  breaker_init (&b);
  for (int i = 0; i < 3; i++)
    breaker_record (&b, &cfg, 0, 0, EIO, false);
  assert_true (breaker_holds (&b));
  breaker_close (&b);
  assert_false (breaker_holds (&b));
  assert_string_equal (breaker_state_name (b.state), "closed");
  /* Errors count again from zero. */
  breaker_record (&b, &cfg, 0, 0, EIO, false);
  assert_false (breaker_holds (&b));
}

static void
test_window_parse (void **state)
{
  static const char *const bad[] = {
    "", "1:00-02:00", "25:00-01:00", "10:60-11:00", "10:00", "10:00-",
    "10:00-11:00,", "10:00-10:00", "00:00-24:00x", "24:00-01:00",
    "10:00 - 11:00",
  };
  struct window_set w = { 0 };

  assert_int_equal (window_parse ("window", "22:00-06:00", &w), 0);
  assert_int_equal (window_parse ("window", "01:00-02:00,12:30-24:00", &w), 0);
  assert_int_equal (w.n, 3);
  assert_int_equal (w.w[2].start, 12 * 60 + 30);
  assert_int_equal (w.w[2].end, 1440);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal (window_parse ("window", bad[i], &w), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (w.n, 3);
  }
  for (int i = 3; i < WINDOW_MAX; i++)
    assert_int_equal (window_parse ("window", "03:00-04:00", &w), 0);
  assert_int_equal (window_parse ("window", "05:00-06:00", &w), -1);
}

static void
test_window_until (void **state)
{
  struct window_set w = { 0 }, none = { 0 };
  struct tm tm = { .tm_hour = 7, .tm_min = 0, .tm_sec = 30 };

  assert_int_equal (window_parse ("window", "22:00-06:00,12:00-13:00", &w), 0);
  assert_int_equal (window_minutes_until_open (&w, 23 * 60), 0);
  assert_int_equal (window_minutes_until_open (&w, 5 * 60 + 59), 0);
  assert_int_equal (window_minutes_until_open (&w, 6 * 60), 6 * 60);
  assert_int_equal (window_minutes_until_open (&w, 12 * 60 + 59), 0);
  assert_int_equal (window_minutes_until_open (&w, 13 * 60), 9 * 60);
  assert_int_equal (window_minutes_until_open (&none, 13 * 60), 0);
  assert_int_equal (window_ms_until_open (&w, &tm), 5 * 3600000 - 30000);
}

/* With extents, the in-memory backend reports its zero blocks as holes
 * (what a discard there leaves): proof of effect can ask it.  The
 * engine runs on the virtual clock.
 */
static struct engine *
open_engine_with (struct mem_backend **mem, const char *const *keys,
                  bool extents)
{
  static const char *const defaults[] = {
    "delay", "0", "idle", "0", "budget", "off", NULL,
  };
  struct engine *e;

  *mem = mem_backend_new (4 * MiB, 4 * KiB, 64 * MiB);
  if (extents)
    mem_backend_enable_extents (*mem);
  e = open_engine_on (*mem, defaults, keys);
  use_virtual_clock (e);
  return e;
}

static struct engine *
open_engine (struct mem_backend **mem, const char *const *keys)
{
  return open_engine_with (mem, keys, false);
}

/* Step the flusher, the clock following its backoffs, until the
 * breaker opens (at most 20 turns).
 */
static void
step_until_open (struct engine *e)
{
  for (int i = 0; i < 20 && strcmp (stats (e).breaker_state, "open"); i++) {
    uint64_t at = engine_flusher_step (e);

    if (at != ENGINE_FLUSHER_IDLE && at > clock_ns)
      clock_ns = at;
  }
}

static void
test_engine_breaker (void **state)
{
  static const char *const keys[] = {
    "breaker-errors", "3", "breaker-backoff", "10s", "max-extents", "5",
    NULL,
  };
  struct mem_backend *mem;
  struct engine *e = open_engine (&mem, keys);

  mem->fail_errno = EIO;
  mem->fail_count = 100;
  for (int i = 0; i < 4; i++)
    assert_int_equal (engine_trim (e, i * 64 * KiB, 16 * KiB, false), 0);
  /* Each failure backs off (10, 20, 40 ms), the third opens it. */
  step_until_open (e);
  assert_string_equal (stats (e).breaker_state, "open");
  assert_int_equal (stats (e).forward_errors, 3);
  /* Held until the probe: nothing reaches the backend. */
  clock_ns += MS (5000);
  assert_true (engine_flusher_step (e) > clock_ns);
  assert_int_equal (stats (e).forward_errors, 3);
  assert_int_equal (stats (e).breaker_next_probe_ms, 5000);
  /* A FUA trim waits with the others; a client FLUSH with
   * flush-discards leaves them pending and succeeds.
   */
  assert_int_equal (engine_trim (e, 256 * KiB, 16 * KiB, true), 0);
  assert_int_equal (stats (e).pending_bytes, 5 * 16 * KiB);
  assert_int_equal (engine_drain (e, NULL, NULL), 0);
  assert_int_equal (stats (e).pending_bytes, 5 * 16 * KiB);
  assert_int_equal (stats (e).forward_errors, 3);
  /* At max-extents the oldest goes, counted, not forwarded. */
  assert_int_equal (engine_trim (e, 512 * KiB, 16 * KiB, false), 0);
  assert_int_equal (stats (e).dropped_breaker_bytes, 16 * KiB);
  assert_int_equal (stats (e).forward_errors, 3);
  assert_int_equal (mem->ncalls, 0);
  /* The device recovers: the probe closes it, the rest follows. */
  mem->fail_count = 0;
  clock_ns += MS (5000);
  for (int i = 0; i < 10; i++)
    engine_flusher_step (e);
  assert_string_equal (stats (e).breaker_state, "closed");
  assert_int_equal (stats (e).breaker_probes, 1);
  assert_int_equal (stats (e).pending_bytes, 0);
  assert_int_equal (mem->ncalls, 5);
  engine_close (e);
}

/* A probe answered with an error about the request (EINVAL) still ends
 * the probe: the device answered.  Else the breaker would wait for it
 * forever and nothing would be forwarded again.
 */
static void
test_engine_probe_einval (void **state)
{
  static const char *const keys[] = {
    "breaker-errors", "2", "breaker-backoff", "1s", NULL,
  };
  struct mem_backend *mem;
  struct engine *e = open_engine (&mem, keys);

  mem->fail_errno = EIO;
  mem->fail_count = 2;
  for (int i = 0; i < 3; i++)
    assert_int_equal (engine_trim (e, i * 64 * KiB, 16 * KiB, false), 0);
  step_until_open (e);
  assert_string_equal (stats (e).breaker_state, "open");
  mem->fail_errno = EINVAL;
  mem->fail_count = 1;
  clock_ns += MS (1000);
  engine_flusher_step (e);
  assert_string_equal (stats (e).breaker_state, "closed");
  assert_int_equal (stats (e).dropped_error_bytes, 16 * KiB);
  for (int i = 0; i < 10; i++)
    engine_flusher_step (e);
  assert_int_equal (stats (e).pending_bytes, 0);
  assert_int_equal (mem->ncalls, 2);
  engine_close (e);
}

static uint64_t
real_clock (void *opaque)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

/* The stop is asked for, as a flush is: an open breaker probes at once
 * and, after a failed probe, again within the stop's bound rather than
 * after the breaker's doubled backoff (2 s here, the whole bound), so a
 * device that recovers during the stop gets what is pending.  On the
 * real clock: the stop's waits are real.
 */
static void
test_engine_stop_probes_again (void **state)
{
  static const char *const keys[] = {
    "breaker-errors", "1", "breaker-backoff", "1s", NULL,
  };
  struct mem_backend *mem;
  struct engine *e = open_engine (&mem, keys);

  engine_test_set_clock (e, real_clock, NULL);
  mem->fail_errno = EIO;
  mem->fail_count = 2;          /* the flusher's discard, the first probe */
  for (int i = 0; i < 3; i++)
    assert_int_equal (engine_trim (e, i * 64 * KiB, 16 * KiB, false), 0);
  engine_flusher_step (e);
  assert_string_equal (stats (e).breaker_state, "open");
  engine_stop (e, 2000);
  assert_int_equal (stats (e).breaker_probes, 2);
  assert_string_equal (stats (e).breaker_state, "closed");
  assert_int_equal (stats (e).dropped_stop_bytes, 0);
  assert_int_equal (stats (e).pending_bytes, 0);
  assert_int_equal (mem->ncalls, 3);
  engine_close (e);
}

static void
write_byte (struct engine *e, uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[64 * KiB];

  memset (buf, byte, length);
  assert_int_equal (engine_pwrite (e, buf, length, offset, false), 0);
}

/* Proof of effect: a discard that freed its range is checked effective;
 * one whose range a write touched before the check is skipped, not
 * counted ineffective (the known-clean map no longer vouches for it);
 * a backend that cannot tell is not checked.
 */
static void
test_engine_proof_race (void **state)
{
  static const char *const keys[] = { "proof", "100%", NULL };
  struct mem_backend *mem;
  struct engine *e = open_engine_with (&mem, keys, true);

  assert_true (stats (e).proof_supported);
  write_byte (e, 0, 64 * KiB, 0xaa);
  write_byte (e, MiB, 64 * KiB, 0xaa);
  assert_int_equal (engine_trim (e, 0, 64 * KiB, false), 0);
  engine_flusher_step (e);                      /* forwarded */
  engine_flusher_step (e);                      /* checked */
  assert_int_equal (stats (e).proof_checks, 1);
  assert_int_equal (stats (e).proof_checked_bytes, 64 * KiB);
  assert_int_equal (stats (e).proof_ineffective_bytes, 0);
  /* A write lands between the discard and its check. */
  assert_int_equal (engine_trim (e, MiB, 64 * KiB, false), 0);
  engine_flusher_step (e);
  write_byte (e, MiB, 4 * KiB, 0xbb);
  engine_flusher_step (e);
  assert_int_equal (stats (e).proof_checks, 1);
  assert_int_equal (stats (e).proof_skipped, 1);
  assert_int_equal (stats (e).proof_ineffective_bytes, 0);
  engine_close (e);

  e = open_engine (&mem, keys);
  assert_false (stats (e).proof_supported);
  assert_int_equal (stats (e).proof_sample_ppm, 0);
  engine_close (e);
}

static void
test_engine_window_pressure (void **state)
{
  const char *keys[] = { "window", NULL, NULL };
  char later[16];
  time_t t = time (NULL) + 7200;
  struct tm tm;
  struct mem_backend *mem;
  struct engine *e;

  localtime_r (&t, &tm);
  snprintf (later, sizeof later, "%02d:%02d-%02d:%02d", tm.tm_hour, tm.tm_min,
            (tm.tm_hour + 1) % 24, tm.tm_min);
  keys[1] = later;
  e = open_engine (&mem, keys);
  assert_int_equal (engine_trim (e, 0, 64 * KiB, false), 0);
  assert_true (engine_flusher_step (e) > clock_ns);
  assert_int_equal (mem->ncalls, 0);
  assert_false (stats (e).window_open);
  engine_set_pressure (e, true);
  engine_flusher_step (e);
  assert_int_equal (mem->ncalls, 1);
  engine_close (e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_breaker_errors),
    cmocka_unit_test (test_breaker_backoff_cap),
    cmocka_unit_test (test_breaker_latency),
    cmocka_unit_test (test_breaker_close_by_hand),
    cmocka_unit_test (test_window_parse),
    cmocka_unit_test (test_window_until),
    cmocka_unit_test (test_engine_breaker),
    cmocka_unit_test (test_engine_probe_einval),
    cmocka_unit_test (test_engine_stop_probes_again),
    cmocka_unit_test (test_engine_proof_race),
    cmocka_unit_test (test_engine_window_pressure),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
