/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: libFuzzer target for the extent map.
 *
 * The input is a program: its first byte picks an address space (bytes,
 * 4 KiB pages, the top of the space where ends reach 2^63, or units of
 * 2^51 over all of it), then each operation is an opcode byte and its
 * arguments.  Every operation runs on the B+tree (built with tiny nodes,
 * so a few dozen extents make a deep tree) and on the reference model
 * (tests/unit/extmap-ref.c); counts and bytes are compared after each,
 * queries compare their answers, and every few operations the whole
 * content and the tree's own invariants are checked.  An opcode can arm
 * an allocation failure: the operation that meets it must fail with
 * ENOMEM and leave the map exactly as it was.  Any difference aborts,
 * which libFuzzer reports as a crash with the input that caused it.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "extmap.h"
#include "extmap-ref.h"

/* Defined in extmap/extmap.c for the tests (EXTMAP_FAULT_INJECTION). */
extern bool (*extmap_fault_hook) (void);

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* Full comparisons (content, bytes, invariants: linear in the number
 * of extents) every this many operations, and at the end.
 */
#define FULL_EVERY 16

struct space {
  const char *name;
  uint64_t base, unit, units;
};

static const struct space spaces[] = {
  { "bytes", 0, 1, 4096 },
  { "pages", 0, 4096, 4096 },
  { "top", EXTMAP_MAX_END - (UINT64_C (4096) << 40), UINT64_C (1) << 40, 4096 },
  { "sparse", 0, UINT64_C (1) << 51, 4096 },
};

struct run {
  const uint8_t *p;
  size_t left;
  const struct space *sp;
  struct extmap *map;
  struct extmap_ref ref;
  uint32_t now;
  unsigned op;
  const char *what;
};

/* Allocations to let through before one fails (0: none fails). */
static unsigned fail_after;
static bool fault_fired;

static bool
fault (void)
{
  if (fail_after == 0)
    return false;
  if (--fail_after > 0)
    return false;
  fault_fired = true;
  return true;
}

#define CHECK(run, cond, ...)                                           \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf (stderr, "fuzz-extmap: %s space, op %u (%s): ",           \
               (run)->sp->name, (run)->op, (run)->what);                \
      fprintf (stderr, __VA_ARGS__);                                    \
      fputc ('\n', stderr);                                             \
      abort ();                                                         \
    }                                                                   \
  } while (0)

static uint8_t
byte (struct run *run)
{
  if (run->left == 0)
    return 0;
  run->left--;
  return *run->p++;
}

static uint16_t
u16 (struct run *run)
{
  uint16_t hi = byte (run);

  return hi << 8 | byte (run);
}

/* An offset in the space, sometimes cut inside a unit. */
static uint64_t
get_offset (struct run *run, uint8_t flags)
{
  const struct space *sp = run->sp;
  uint64_t off = sp->base + (u16 (run) % sp->units) * sp->unit;

  if (sp->unit > 1 && (flags & 0x80))
    off += sp->unit / 256 * byte (run);
  return off;
}

/* Mostly a few units, sometimes many; sometimes short of a unit. */
static uint64_t
get_length (struct run *run, uint8_t flags)
{
  const struct space *sp = run->sp;
  uint8_t b = byte (run);
  uint64_t units = b >= 250 ? 1 + u16 (run) : 1 + b % 32;
  uint64_t len = units * sp->unit;

  if (sp->unit > 1 && (flags & 0x40))
    len -= sp->unit / 256 * byte (run);
  return len;
}

/* Recent times with ties, sometimes the extremes. */
static uint32_t
get_time (struct run *run)
{
  uint8_t b = byte (run);

  if (b == 0)
    return 0;
  if (b == 255)
    return UINT32_MAX;
  return run->now - MIN (run->now, (uint32_t) b % 40);
}

/* Everything: content, counters and the tree's invariants. */
static void
full_compare (struct run *run)
{
  const char *err = ref_check_all (run->map, &run->ref);

  CHECK (run, err == NULL, "%s", err);
}

/* An operation refused (EINVAL, or ENOMEM when a fault fired) must
 * leave the map as it was; the reference was not touched.
 */
static void
check_refused (struct run *run, int r, bool valid)
{
  int err = errno;

  if (valid)
    CHECK (run, r == 0 || (err == ENOMEM && fault_fired),
           "failed (%s) without an injected fault", strerror (err));
  else
    CHECK (run, r == -1 && err == EINVAL, "invalid range: got %d, errno %d",
           r, err);
  if (r == -1)
    full_compare (run);
}

static void
do_insert (struct run *run, uint8_t flags)
{
  uint64_t off = get_offset (run, flags), len = get_length (run, flags);
  uint32_t t = get_time (run);
  bool valid = ref_valid (off, len);
  int r;

  run->what = "insert";
  fault_fired = false;
  r = extmap_insert (run->map, off, len, t);
  check_refused (run, r, valid);
  if (r == 0)
    ref_insert (&run->ref, off, len, t);
}

static void
do_remove (struct run *run, uint8_t flags)
{
  uint64_t off = get_offset (run, flags), len = get_length (run, flags);
  uint64_t removed = UINT64_MAX, want;
  bool valid = ref_valid (off, len);
  int r;

  run->what = "remove";
  fault_fired = false;
  r = extmap_remove (run->map, off, len, &removed);
  check_refused (run, r, valid);
  if (r == 0) {
    want = ref_remove (&run->ref, off, len);
    CHECK (run, removed == want, "removed %" PRIu64 ", reference %" PRIu64,
           removed, want);
  }
}

static void
do_query (struct run *run, uint8_t flags)
{
  enum ref_query q = (flags >> 4) % REF_QUERIES;
  struct ref_query_args a = { 0 };
  const char *err;

  switch (q) {
  case REF_LARGEST_ALIGNED_BEFORE:
    a.cutoff = get_time (run);
    a.minlen = get_length (run, flags);
    break;
  case REF_FIND_OVERLAP:
    a.x = get_offset (run, flags);
    a.len = get_length (run, flags);
    break;
  case REF_FIND_FROM:
    a.x = get_offset (run, flags);
    break;
  case REF_ITERATE:
    a.x = get_offset (run, flags);
    a.stop_after = 1 + byte (run) % 40;
    break;
  default:
    break;
  }
  run->what = ref_query_names[q];
  err = ref_check_query (run->map, &run->ref, q, &a);
  CHECK (run, err == NULL, "%s", err);
}

static void
one_op (struct run *run)
{
  uint8_t code = byte (run);

  run->now += code & 3;
  switch (code % 10) {
  case 0: case 1: case 2:
    do_insert (run, code);
    break;
  case 3: case 4: case 5:
    do_remove (run, code);
    break;
  case 6:
    do_query (run, code);
    break;
  case 7: {
    uint8_t b = byte (run);
    uint32_t delta = b == 255 ? UINT32_MAX / 2 : b;

    run->what = "rebase_time";
    extmap_rebase_time (run->map, delta);
    ref_rebase_time (&run->ref, delta);
    run->now -= MIN (run->now, delta);
    break;
  }
  case 8:
    run->what = "arm fault";
    fail_after = 1 + byte (run) % 4;
    break;
  default:
    run->what = "clear";
    if (byte (run) == 0) {
      extmap_clear (run->map);
      ref_clear (&run->ref);
    }
  }
  CHECK (run, extmap_count (run->map) == run->ref.n,
         "count %zu, reference %zu", extmap_count (run->map), run->ref.n);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct run run = { .p = data, .left = size, .now = 1000 };

  if (size == 0)
    return 0;
  extmap_fault_hook = fault;
  fail_after = 0;
  run.sp = &spaces[byte (&run) % (sizeof spaces / sizeof spaces[0])];
  run.map = extmap_new ();
  if (run.map == NULL)
    abort ();
  for (run.op = 0; run.left > 0; run.op++) {
    one_op (&run);
    if (run.op % FULL_EVERY == 0)
      full_compare (&run);
  }
  fail_after = 0;
  run.what = "end";
  full_compare (&run);
  extmap_free (run.map);
  ref_free (&run.ref);
  return 0;
}
