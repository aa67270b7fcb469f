/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what the engine's unit tests share (engine-util.h). */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine.h"
#include "engine-test.h"
#include "engine-util.h"
#include "mem-backend.h"

uint64_t clock_ns;

static void
set_keys (struct engine_config *cfg, const char *const *keys)
{
  for (; keys && *keys; keys += 2)
    assert_int_equal (engine_config_set (cfg, keys[0], keys[1]), 0);
}

struct engine *
try_open_engine_on (struct mem_backend *m, const char *const *defaults,
                    const char *const *keys)
{
  struct engine_config cfg;
  struct engine *e;
  int err;

  engine_config_init (&cfg);
  set_keys (&cfg, defaults);
  set_keys (&cfg, keys);
  e = engine_open (&cfg, &m->b);
  err = errno;                  /* why it did not open, for the test */
  engine_config_free (&cfg);
  errno = err;
  return e;
}

struct engine *
open_engine_on (struct mem_backend *m, const char *const *defaults,
                const char *const *keys)
{
  struct engine *e = try_open_engine_on (m, defaults, keys);

  assert_non_null (e);
  return e;
}

struct engine_stats
stats (struct engine *e)
{
  struct engine_stats st;

  engine_get_stats (e, &st);
  return st;
}

unsigned
calls (struct mem_backend *m, struct mem_discard *out)
{
  return mem_backend_calls (m, out, MEM_MAX_CALLS);
}

uint64_t
virtual_clock (void *opaque)
{
  return clock_ns;
}

void
use_virtual_clock (struct engine *e)
{
  clock_ns = MS (1000);
  engine_test_set_clock (e, virtual_clock, NULL);
}
