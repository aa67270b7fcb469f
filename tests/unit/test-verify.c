/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: the executable contracts (common/verify.h) trip.
 * Each case breaks one contract of one module in a child process and
 * expects the child to die of SIGABRT having printed that check: the
 * function it sits in and its expression.  A check that no longer fires,
 * or another that fires first, fails the case.  Cases marked debug need
 * --enable-debug-checks (DEBUG_VERIFY) and are skipped without it.
 */
#include <config.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "breaker.h"
#include "clean.h"
#include "engine-internal.h"
#include "extmap-internal.h"
#include "internal.h"
#include "journal.h"
#include "mem-backend.h"
#include "pacing.h"
#include "policy.h"
#include "proof.h"
#include "thin-internal.h"
#include "thin-util.h"
#include "verify.h"
#include "window.h"

#define GRAN 4096

/* Run fn in a child with stderr captured; it must die of SIGABRT
 * having printed want.
 */
static void
expect_abort (void (*fn) (void), const char *want)
{
  char out[8192];
  size_t len = 0;
  ssize_t r;
  int fds[2], status;
  pid_t pid;

  assert_int_equal (pipe (fds), 0);
  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    const struct rlimit no_core = { 0, 0 };

    setrlimit (RLIMIT_CORE, &no_core);
    dup2 (fds[1], STDERR_FILENO);
    close (fds[0]);
    close (fds[1]);
    fn ();
    _exit (0);                  /* the check did not fire */
  }
  close (fds[1]);
  while (len < sizeof out - 1 &&
         (r = read (fds[0], out + len, sizeof out - 1 - len)) > 0)
    len += r;
  out[len] = '\0';
  close (fds[0]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  if (!WIFSIGNALED (status) || WTERMSIG (status) != SIGABRT ||
      strstr (out, want) == NULL)
    fail_msg ("expected SIGABRT and \"%s\"; got %s %d and: %s", want,
              WIFSIGNALED (status) ? "signal" : "exit status",
              WIFSIGNALED (status) ? WTERMSIG (status) : WEXITSTATUS (status),
              out);
}

static void
need_debug_checks (void)
{
  if (!DC_HAVE_DEBUG_CHECKS)
    skip ();
}

/* ---- the extent map ---- */

static void
extmap_odd_granularity (void)
{
  extmap_set_granularity (extmap_new (), 3000);
}

static void
extmap_alloc_unreserved (void)
{
  extmap_node_alloc (&extmap_new ()->pool);
}

/* Two extents made to overlap behind the map's back: the next insert's
 * self-check finds them.
 */
static void
extmap_overlap (void)
{
  struct extmap *m = extmap_new ();

  extmap_insert (m, 0, 10, 0);
  extmap_insert (m, 20, 10, 0);
  m->root->leaf.length[0] = 25;
  extmap_insert (m, 40, 10, 0);
}

static void
test_extmap (void **state)
{
  expect_abort (extmap_odd_granularity,
                "extmap_set_granularity: VERIFY(g == 0 || is_power_of_2 (g))");
  expect_abort (extmap_alloc_unreserved,
                "extmap_node_alloc: VERIFY3U(pool->free_nodes > 0) "
                "failed (0 > 0)");
}

static void
test_extmap_debug (void **state)
{
  need_debug_checks ();
  expect_abort (extmap_overlap,
                "verify_inserted: VERIFY(map->count > EXTMAP_SELF_CHECK_MAX || "
                "extmap_check (map) == NULL)");
}

/* ---- policy ---- */

static void
policy_wrapping_range (void)
{
  uint64_t o, l;

  policy_aligned_part (UINT64_MAX - 10, 100, GRAN, &o, &l);
}

static void
clean_odd_granularity (void)
{
  struct clean_map c;

  clean_init (&c, 16, 3000);
}

static void
pacing_partial_chunk (void)
{
  struct pace_inputs in = {
    .granularity = GRAN, .chunk_limit = GRAN + 512, .budget_us = 1000,
  };
  struct pace_decision d;

  pace_decide (&in, &d);
}

static void
test_policy (void **state)
{
  expect_abort (policy_wrapping_range,
                "policy_aligned_part: VERIFY(!wraps) failed");
  expect_abort (clean_odd_granularity,
                "clean_init: VERIFY(max_extents == 0 || "
                "is_power_of_2 (granularity))");
  expect_abort (pacing_partial_chunk,
                "pace_decide: VERIFY3U(in->chunk_limit % in->granularity == 0) "
                "failed (512 == 0)");
}

/* ---- protect ---- */

static void
breaker_probe_closed (void)
{
  struct breaker b;

  breaker_init (&b);
  breaker_probe_begin (&b);
}

static void
window_empty (void)
{
  struct window_set set = { .n = 1, .w = { { 600, 600 } } };

  window_minutes_until_open (&set, 0);
}

static void
proof_odd_granularity (void)
{
  struct proof p;

  proof_init (&p, 1000000, 1 << 20, true);
  proof_offer (&p, 0, 1 << 20, 3000);
}

static void
test_protect (void **state)
{
  expect_abort (breaker_probe_closed,
                "breaker_probe_begin: VERIFY3U(b->state == BREAKER_OPEN)");
  expect_abort (window_empty,
                "until_one: VERIFY3U(start != end % DAY_MINUTES) "
                "failed (600 != 600)");
  expect_abort (proof_odd_granularity,
                "proof_offer: VERIFY(is_power_of_2 (granularity))");
}

/* ---- persist ---- */

static void
journal_empty_insert (void)
{
  struct journal_record r = {
    .map = JOURNAL_PENDING, .op = EXTMAP_OBSERVE_INSERT, .offset = GRAN,
  };
  unsigned char out[JOURNAL_RECORD_SIZE];

  journal_record_encode (&r, out);
}

static void
test_persist (void **state)
{
  expect_abort (journal_empty_insert,
                "verify_record: VERIFY3U(r->length > 0) failed (0 > 0)");
}

/* ---- the engine: the forward path and the pending set ---- */

#define ENGINE_DISK (UINT64_C (16) << 20)

static struct engine *
new_engine (void)
{
  struct mem_backend *m = mem_backend_new (ENGINE_DISK, GRAN, 1 << 20);
  struct engine_config cfg;
  struct engine *e;

  engine_config_init (&cfg);
  e = engine_open (&cfg, &m->b);
  if (e == NULL)
    _exit (2);
  return e;
}

static void
forward_past_the_end (void)
{
  struct engine *e = new_engine ();

  engine_lock_acquire (e);
  engine_forward_drops_lock (e, ENGINE_DISK, GRAN, 0, false, false);
  engine_lock_release (e);      /* not reached */
}

static void
record_past_the_end (void)
{
  struct engine *e = new_engine ();

  engine_lock_acquire (e);
  engine_record_trim_drops_lock (e, ENGINE_DISK - GRAN, 2 * GRAN);
  engine_lock_release (e);      /* not reached */
}

/* The compiler's analysis would refuse these calls: the run-time check
 * is what catches a caller it cannot see.
 */
static void
ticks_unlocked (void)
  NO_THREAD_SAFETY_ANALYSIS
{
  engine_ticks_locked (new_engine ());
}

static void
bound_unlocked (void)
  NO_THREAD_SAFETY_ANALYSIS
{
  engine_enforce_bound_drops_lock (new_engine ());
}

static void
test_engine (void **state)
{
  expect_abort (forward_past_the_end,
                "forward_drops_lock: VERIFY3U(end <= backend_size (e->backend)) "
                "failed (16781312 <= 16777216)");
  expect_abort (record_past_the_end,
                "engine_record_trim_drops_lock: "
                "VERIFY3U(end <= backend_size (e->backend))");
}

static void
test_engine_debug (void **state)
{
  need_debug_checks ();
  expect_abort (ticks_unlocked,
                "engine_ticks_locked: VERIFY_HELD(&e->lock) failed");
  expect_abort (bound_unlocked,
                "engine_enforce_bound_drops_lock: "
                "VERIFY_HELD(&e->lock) failed");
}

/* ---- thin mode: the allocator and its journal ---- */

static struct thin *
new_thin (void)
{
  open_thin ();
  return thin_of (vol);
}

static void
unreserve_past_the_store (void)
{
  struct thin *t = new_thin ();
  struct plan pl;

  thin_plan_init (&pl);
  pl.seg[0] = (struct segment) {
    .l = 0, .n = 2, .p = NPHYS - 1, .fresh = true,
  };
  pl.n = 1;
  thin_lock_acquire (t);
  thin_unreserve_locked (t, &pl);
  thin_lock_release (t);        /* not reached */
}

static void
record_past_the_store (void)
{
  struct thin *t = new_thin ();

  thin_lock_acquire (t);
  if (thin_reserve_records_locked (t, 1) == -1)
    _exit (2);
  thin_append_record_locked (t, THIN_REC_MAP, 0, 1, NPHYS);
  thin_lock_release (t);        /* not reached */
}

static void
plan_unlocked (void)
  NO_THREAD_SAFETY_ANALYSIS
{
  struct thin *t = new_thin ();
  struct plan pl;

  thin_plan_init (&pl);
  thin_plan_locked (t, &pl, 0, 1, true);
}

static void
slots_freed_twice (void)
{
  struct thin_space s;

  if (thin_space_init (&s) == -1)
    _exit (2);
  thin_space_add_clean (&s, 10, 4, false);
  thin_space_add_pending (&s, 12, 1);
}

static void
test_thin (void **state)
{
  expect_abort (unreserve_past_the_store,
                "thin_unreserve_locked: VERIFY3U(pl->seg[i].p + pl->seg[i].n "
                "<= t->map.nphys) failed (17 <= 16)");
  expect_abort (record_past_the_store,
                "thin_append_record_locked: VERIFY3U((uint64_t) p + n <= "
                "t->map.nphys) failed (17 <= 16)");
}

static void
test_thin_debug (void **state)
{
  need_debug_checks ();
  expect_abort (plan_unlocked,
                "thin_plan_locked: VERIFY_HELD(&t->lock) failed");
  expect_abort (slots_freed_twice,
                "thin_space_add_pending: VERIFY(nowhere_free (s, p, n))");
}

/* ---- the backends ---- */

static void
backend_odd_granularity (void)
{
  struct backend b = {
    .size = 1 << 20, .limits = { .discard_granularity = 3000 },
  };
  uint64_t offset = 0, length = 1 << 16;

  backend_discard_align_verified (&b, &offset, &length);
}

static void
test_backend (void **state)
{
  expect_abort (backend_odd_granularity,
                "backend_discard_align_verified: VERIFY(is_power_of_2 (g))");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_extmap),
    cmocka_unit_test (test_extmap_debug),
    cmocka_unit_test (test_policy),
    cmocka_unit_test (test_protect),
    cmocka_unit_test (test_persist),
    cmocka_unit_test (test_engine),
    cmocka_unit_test (test_engine_debug),
    cmocka_unit_test_setup_teardown (test_thin, thin_setup, thin_teardown),
    cmocka_unit_test_setup_teardown (test_thin_debug, thin_setup,
                                     thin_teardown),
    cmocka_unit_test (test_backend),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
