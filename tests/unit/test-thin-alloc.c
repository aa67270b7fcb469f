/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: unit tests of thin mode's allocator through the volume
 * (thin-alloc.c): a stream stays physically contiguous, pending runs
 * are reused (before clean space), and a write the pool cannot serve
 * fails with ENOSPC having changed nothing.
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

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) \
  cmocka_unit_test_setup_teardown (name, thin_setup, thin_teardown)
    T (test_contiguity_and_reuse),
    T (test_reuse_before_clean),
    T (test_enospc_changes_nothing),
#undef T
  };

  return cmocka_run_group_tests_name ("thin-alloc", tests, NULL, NULL);
}
