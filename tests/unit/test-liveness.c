/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the flusher's liveness (invariant 8), as a property
 * over a virtual clock.
 *
 * Each scenario draws keys at random (minlen, small, granularity,
 * max-discard, delay, idle, rate, budget, max-extents), then a stream of trims,
 * writes and zeroes at random moments, with a few transient discard
 * failures.  The flusher is stepped as its thread would run it
 * (engine_flusher_step): at the time its last turn asked for, or at
 * once after a trim (trims signal it; writes and zeroes do not).  When
 * the input stops, it is stepped on until it says only input can make
 * more work.  The properties:
 *   - every extent that can be forwarded (holding a whole granule, at
 *     least minlen long, and not held by small=: at least the threshold
 *     in force, small=SIZE's or the one small=auto took from the cost
 *     model, small_len in the statistics) is forwarded within delay + idle (at least
 *     20 ms with budget=) + one pacing step of the last input, plus one
 *     rate= slot per command and the backoffs of the failures injected;
 *   - what stays pending cannot be forwarded;
 *   - no turn that asks to run again at once has done nothing (a spin).
 *
 *   test-liveness [SEED]   runs that one scenario (LIVENESS_SCENARIOS=N
 *                          sets how many the default run tries)
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arith.h"
#include "engine.h"
#include "engine-test.h"
#include "engine-util.h"
#include "mem-backend.h"
#include "splitmix.h"

#define DISK (16 * MiB)
/* The flusher's poll while clients are busy, and pacing's least quiet. */
#define PACING_STEP_MS 20
/* Backoff after failures: 10 ms, doubling (cache/engine/engine-forward.c). */
#define BACKOFF_FIRST_MS 10
#define MAX_FAILURES 3

static uint64_t rng;
static unsigned auto_holding;       /* scenarios where small=auto held */

static uint64_t
below (uint64_t n)
{
  return splitmix_below (&rng, n);
}

struct scenario;
static void discard_takes_time (void *opaque);

struct scenario {
  uint64_t seed;
  uint32_t backend_granularity;
  uint64_t granularity;             /* in force */
  uint64_t minlen, delay_ms, idle_ms, rate, budget_ms, max_extents;
  const char *small;                /* small=: auto, off or a size */
  uint64_t max_discard;
  uint64_t discard_ns;              /* what each discard costs */
  unsigned ops;
  char desc[256];
};

/* key=V, or key=Vms for a duration. */
static void
set_key (struct engine_config *cfg, const char *key, uint64_t v, bool ms)
{
  char value[32];

  snprintf (value, sizeof value, "%" PRIu64 "%s", v, ms ? "ms" : "");
  assert_int_equal (engine_config_set (cfg, key, value), 0);
}

/* A discard takes time on the virtual clock, so that pacing measures
 * a cost and spaces discards by it.
 */
static void
discard_takes_time (void *opaque)
{
  const struct scenario *sc = opaque;

  clock_ns += sc->discard_ns;
}

/* Keys at random, each sometimes at its default or its extreme. */
static struct engine *
open_scenario (struct scenario *sc, struct mem_backend **memp)
{
  struct engine_config cfg;
  struct mem_backend *mem;
  struct engine *e;

  sc->backend_granularity = below (2) ? 4096 : 512;
  sc->granularity = sc->backend_granularity << below (5);
  sc->max_discard = below (3) ? 64 * MiB : sc->granularity << below (4);
  sc->minlen = below (3) == 0 ? 0 : below (2) ? below (256 * KiB)
                                              : 64 * KiB;
  sc->delay_ms = below (4) == 0 ? 0 : below (5000);
  sc->idle_ms = below (3) == 0 ? 0 : below (500);
  sc->rate = below (3) == 0 ? 1 + below (200) : 0;
  sc->budget_ms = below (2) ? 1 + below (20) : 0;
  sc->max_extents = below (4) == 0 ? 16 + below (64) : 1024 * 1024;
  {
    static const char *const smalls[] = { "auto", "off", "32k", "100000" };

    sc->small = smalls[below (4)];
  }
  sc->discard_ns = below (2) ? 0 : below (2) ? below (MS (1)) : below (MS (30));
  sc->ops = 20 + below (400);
  snprintf (sc->desc, sizeof sc->desc,
            "seed %" PRIu64 ": granularity=%" PRIu64 " (backend %" PRIu32
            ") max-discard=%" PRIu64 " minlen=%" PRIu64 " small=%s delay=%" PRIu64
            "ms idle=%" PRIu64 "ms rate=%" PRIu64 " budget=%" PRIu64
            "ms max-extents=%" PRIu64 ", discards of %" PRIu64 " us, "
            "%u operations",
            sc->seed, sc->granularity, sc->backend_granularity,
            sc->max_discard, sc->minlen, sc->small, sc->delay_ms, sc->idle_ms, sc->rate,
            sc->budget_ms, sc->max_extents, sc->discard_ns / 1000, sc->ops);

  engine_config_init (&cfg);
  set_key (&cfg, "granularity", sc->granularity, false);
  set_key (&cfg, "max-discard", sc->max_discard, false);
  set_key (&cfg, "minlen", sc->minlen, false);
  assert_int_equal (engine_config_set (&cfg, "small", sc->small), 0);
  set_key (&cfg, "delay", sc->delay_ms, true);
  set_key (&cfg, "idle", sc->idle_ms, true);
  set_key (&cfg, "rate", sc->rate, false);
  set_key (&cfg, "budget", sc->budget_ms, true);
  set_key (&cfg, "max-extents", sc->max_extents, false);
  mem = mem_backend_new (DISK, sc->backend_granularity, 64 * MiB);
  e = engine_open (&cfg, &mem->b);
  engine_config_free (&cfg);
  assert_non_null (e);
  use_virtual_clock (e);
  mem->on_discard = discard_takes_time;
  mem->on_discard_opaque = sc;
  *memp = mem;
  return e;
}

/* Commands sent or tried: what a turn that runs again at once did. */
static uint64_t
progress_of (struct engine *e)
{
  struct engine_stats st;

  engine_get_stats (e, &st);
  return st.forwarded + st.forward_errors + st.dropped;
}

/* Run the flusher as its thread would until the clock reaches until:
 * each turn at the time the last one asked for.  *wake is that time,
 * kept across calls (a write does not signal the thread).  Returns the
 * number of turns that asked to run again at once having done nothing.
 */
static unsigned
run_flusher (struct engine *e, uint64_t *wake, uint64_t until)
{
  unsigned spins = 0, turns = 0;

  while (*wake <= until && *wake != ENGINE_FLUSHER_IDLE) {
    uint64_t before = progress_of (e);

    clock_ns = MAX (clock_ns, *wake);
    *wake = engine_flusher_step (e);
    if (*wake <= clock_ns && progress_of (e) == before)
      spins++;
    /* A turn that forwarded runs again at once: bounded by the work. */
    if (++turns > 10 * 1000 * 1000 || spins > 0)
      break;
  }
  return spins;
}

/* A range for a client request: mostly small and unaligned, sometimes
 * whole granules, sometimes long.
 */
static void
pick_range (const struct scenario *sc, uint64_t *offset, uint64_t *length)
{
  switch (below (4)) {
  case 0:
    *length = (1 + below (16)) * sc->granularity;
    *offset = below (DISK / sc->granularity) * sc->granularity;
    break;
  case 1:
    *length = 1 + below (2 * MiB);
    *offset = below (DISK);
    break;
  default:
    *length = 512 * (1 + below (64));
    *offset = 512 * below (DISK / 512);
  }
  if (*offset + *length > DISK)
    *length = DISK - *offset;
  if (*length == 0)
    *length = 512, *offset = DISK - 512;
}

static bool
forwardable (const struct scenario *sc, const struct extent *x,
             uint64_t small_len)
{
  uint64_t g = sc->granularity;

  return x->length >= sc->minlen && x->length >= small_len &&
    round_down (x->offset + x->length, g) > round_up (x->offset, g);
}

static void
run_scenario (uint64_t seed)
{
  static char zeros[2 * MiB];
  struct scenario sc = { .seed = seed };
  struct mem_backend *mem;
  struct engine *e;
  uint64_t wake = ENGINE_FLUSHER_IDLE, stop_ns, bound_ns, commands;
  unsigned spins = 0, failures = 0;
  struct extent x[64];
  uint64_t from = 0;
  uint32_t now_ticks;
  size_t n;
  struct engine_stats st;

  rng = seed;
  e = open_scenario (&sc, &mem);

  for (unsigned i = 0; i < sc.ops; i++) {
    uint64_t offset, length, gap;

    /* Time passes: often none, sometimes past delay and idle. */
    switch (below (4)) {
    case 0: gap = 0; break;
    case 1: gap = MS (below (sc.idle_ms + 1)); break;
    case 2: gap = MS (below (2 * sc.delay_ms + 1)); break;
    default: gap = below (MS (50));
    }
    gap += clock_ns;
    spins += run_flusher (e, &wake, gap);
    clock_ns = gap;
    if (failures < MAX_FAILURES && below (50) == 0) {
      mem->fail_errno = EIO;
      mem->fail_count = 1;
      failures++;
    }
    pick_range (&sc, &offset, &length);
    switch (below (10)) {
    case 0: case 1:
      assert_int_equal (engine_pwrite (e, zeros,
                                       MIN (length, (uint64_t) sizeof zeros),
                                       offset, false), 0);
      break;
    case 2:
      assert_int_equal (engine_zero (e, offset, length, false, false, false),
                        0);
      break;
    default:
      assert_int_equal (engine_trim (e, offset, length, false), 0);
      wake = clock_ns;            /* a trim signals the flusher */
    }
  }

  /* The input stops.  Every command from now on may wait a rate slot;
   * every failure injected may have left a backoff to wait out.
   */
  stop_ns = clock_ns;
  commands = progress_of (e);
  spins += run_flusher (e, &wake, UINT64_MAX - 1);
  commands = progress_of (e) - commands;
  bound_ns = stop_ns + MS (sc.delay_ms) + commands * sc.discard_ns +
    MS (sc.budget_ms ? MAX (sc.idle_ms, (uint64_t) PACING_STEP_MS)
                     : sc.idle_ms) +
    MS (1) +
    (sc.rate ? (commands + 1) * (1000000000 / sc.rate + 1) : 0) +
    (failures ? MS (BACKOFF_FIRST_MS * ((1 << MAX_FAILURES) - 1)) : 0);

  if (spins)
    fail_msg ("%s: the flusher asked to run again at once without doing "
              "anything", sc.desc);
  if (wake != ENGINE_FLUSHER_IDLE)
    fail_msg ("%s: the flusher never settled", sc.desc);
  engine_get_stats (e, &st);
  if (strcmp (sc.small, "off") != 0 && strcmp (sc.small, "auto") != 0 &&
      st.small_len != strtoull (sc.small, NULL, 10) * (sc.small[2] == 'k' ? KiB : 1))
    fail_msg ("%s: small_len %" PRIu64 " is not the key's", sc.desc,
              st.small_len);
  if (strcmp (sc.small, "auto") == 0 && st.small_len > 0)
    auto_holding++;
  while ((n = engine_dump_batch (e, from, x, 64, &now_ticks)) > 0) {
    for (size_t i = 0; i < n; i++)
      if (forwardable (&sc, &x[i], st.small_len))
        fail_msg ("%s: [%" PRIu64 ", +%" PRIu64 ") queued at %" PRIu32
                  " can be forwarded and is still pending (now %" PRIu32 ")",
                  sc.desc, x[i].offset, x[i].length, x[i].time, now_ticks);
    from = x[n - 1].offset + x[n - 1].length;
  }
  /* The last turn came at the latest at the bound: the clock stopped
   * there.
   */
  if (clock_ns > bound_ns)
    fail_msg ("%s: the last forwarding came %.3f s after the input stopped; "
              "the bound is %.3f s", sc.desc, (clock_ns - stop_ns) / 1e9,
              (bound_ns - stop_ns) / 1e9);
  engine_close (e);
}

static uint64_t user_seed;
static bool have_user_seed;

static void
test_liveness (void **state)
{
  const char *env = getenv ("LIVENESS_SCENARIOS");
  unsigned scenarios = env ? (unsigned) atoi (env) : 400;

  if (have_user_seed) {
    run_scenario (user_seed);
    return;
  }
  for (unsigned i = 1; i <= scenarios; i++)
    run_scenario (i);
  print_message ("%u scenarios, small=auto held extents in %u\n",
                 scenarios, auto_holding);
}

int
main (int argc, char *argv[])
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_liveness),
  };

  if (argc > 1) {
    user_seed = strtoull (argv[1], NULL, 0);
    have_user_seed = true;
  }
  return cmocka_run_group_tests (tests, NULL, NULL);
}
