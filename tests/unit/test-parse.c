/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the value parsers and engine_config_set. */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine-config.h"
#include "parse.h"
#include "service.h"

static void
test_size (void **state)
{
  uint64_t v = 7;

  assert_int_equal (parse_size ("k", "4096", &v), 0);
  assert_int_equal (v, 4096);
  assert_int_equal (parse_size ("k", "64k", &v), 0);
  assert_int_equal (v, 65536);
  assert_int_equal (parse_size ("k", "1M", &v), 0);
  assert_int_equal (v, 1048576);
  assert_int_equal (parse_size ("k", "2G", &v), 0);
  assert_int_equal (v, UINT64_C (2) << 30);
  assert_int_equal (parse_size ("k", "512b", &v), 0);
  assert_int_equal (v, 512);
  v = 7;
  const char *bad[] = { "", "-1", "+1", " 1", "1x", "1kk", "k", "8E", "99999999999999999999", "1.5M" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    errno = 0;
    assert_int_equal (parse_size ("k", bad[i], &v), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (v, 7);
  }
}

/* auto|SIZE: auto is 0; bounds, powers of two and the size forms. */
static void
test_auto_size (void **state)
{
  uint64_t v = 7;

  assert_int_equal (parse_auto_size ("k", "auto", "f", 512, 1 << 30, true,
                                     &v), 0);
  assert_int_equal (v, 0);
  assert_int_equal (parse_auto_size ("k", "4k", "f", 512, 1 << 30, true,
                                     &v), 0);
  assert_int_equal (v, 4096);
  assert_int_equal (parse_auto_size ("k", "1G", "f", 512, 1 << 30, true,
                                     &v), 0);
  assert_int_equal (v, UINT64_C (1) << 30);
  assert_int_equal (parse_auto_size ("k", "1000", "f", 512, UINT64_MAX,
                                     false, &v), 0);
  assert_int_equal (v, 1000);
  v = 7;
  const char *bad[] = { "", "Auto", "auto2", "-4k", "256", "2G", "12k",
                        "0", "4kk" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    errno = 0;
    assert_int_equal (parse_auto_size ("k", bad[i], "f", 512, 1 << 30, true,
                                       &v), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (v, 7);
  }
}

static void
test_duration (void **state)
{
  /* nbdkit_parse_delay's forms (nbdkit >= 1.40), in whole ms rounded up. */
  static const struct { const char *value; uint64_t ms; } good[] = {
    { "30", 30000 }, { "30s", 30000 }, { "200ms", 200 }, { "2m", 120000 },
    { "1h", 3600000 }, { "1.5s", 1500 }, { "1.5", 1500 }, { "0.5", 500 },
    { "250ms", 250 }, { "1.2s", 1200 }, { "0.25m", 15000 },
    { "1.5h", 5400000 }, { "0", 0 }, { "0.0s", 0 }, { "1.2ms", 2 },
    { "1.2us", 1 }, { "1.2\xc2\xb5s", 1 }, { "1ns", 1 }, { "1000000ns", 1 },
    { "1000001ns", 2 }, { "0.0000000001s", 1 }, { "0.001000000s", 1 },
    { "2562047h", UINT64_C (9223369200000) }, /* about INT64_MAX ns */
  };
  static const char *const bad[] = {
    "", "-1s", "+1s", "1sec", "ms", "s", ".5", "1.", "1.s", "1..5", "1.5.5",
    "1e9h", "1e3", "soon", "1 s", " 1", "1s ", "1S", "1d", "1,5s",
    "99999999999999999999", "2562048h", "9223372036.854775808s",
  };
  uint64_t v;

  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    v = 7;
    if (parse_duration_ms ("d", good[i].value, &v) != 0 || v != good[i].ms)
      fail_msg ("%s: got %" PRIu64 " ms, want %" PRIu64, good[i].value, v,
                good[i].ms);
  }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 7;
    errno = 0;
    if (parse_duration_ms ("d", bad[i], &v) != -1 || errno != EINVAL || v != 7)
      fail_msg ("'%s' accepted (%" PRIu64 " ms)", bad[i], v);
  }
}

static void
test_bool (void **state)
{
  bool b = false;

  assert_int_equal (parse_bool ("b", "TRUE", &b), 0);
  assert_true (b);
  assert_int_equal (parse_bool ("b", "off", &b), 0);
  assert_false (b);
  assert_int_equal (parse_bool ("b", "maybe", &b), -1);
  assert_false (b);
}

static void
test_scaled_count (void **state)
{
  uint64_t n = 7;

  assert_int_equal (parse_scaled_count ("c", "1M", &n), 0);
  assert_int_equal (n, 1048576);
  assert_int_equal (parse_scaled_count ("c", "1000", &n), 0);
  assert_int_equal (n, 1000);
  assert_int_equal (parse_scaled_count ("c", "1.5M", &n), -1);
  assert_int_equal (errno, EINVAL);
  assert_int_equal (parse_scaled_count ("c", "-5", &n), -1);
  assert_int_equal (n, 1000);
}

static void
test_config_keys (void **state)
{
  struct engine_config cfg;

  engine_config_init (&cfg);
  assert_int_equal (cfg.delay_ms, 30000);
  assert_int_equal (cfg.idle_ms, 200);
  assert_int_equal (cfg.max_extents, 1048576);
  assert_int_equal (engine_config_set (&cfg, "nosuchkey", "1"), 1);
  assert_int_equal (engine_config_set (&cfg, "granularity", "3000"), -1);
  assert_int_equal (cfg.granularity, 0);
  assert_int_equal (engine_config_set (&cfg, "granularity", "64k"), 0);
  assert_int_equal (cfg.granularity, 65536);
  assert_int_equal (engine_config_set (&cfg, "granularity", "auto"), 0);
  assert_int_equal (cfg.granularity, 0);
  assert_int_equal (engine_config_set (&cfg, "max-extents", "0"), -1);
  assert_int_equal (engine_config_set (&cfg, "max-extents", "1M"), 0);
  assert_int_equal (cfg.max_clean_extents, 1048576);
  assert_int_equal (engine_config_set (&cfg, "max-clean-extents", "many"), -1);
  assert_int_equal (engine_config_set (&cfg, "max-clean-extents", "-1"), -1);
  assert_int_equal (engine_config_set (&cfg, "max-clean-extents", "1.5M"), -1);
  assert_int_equal (cfg.max_clean_extents, 1048576);
  assert_int_equal (engine_config_set (&cfg, "max-clean-extents", "64k"), 0);
  assert_int_equal (cfg.max_clean_extents, 65536);
  assert_int_equal (engine_config_set (&cfg, "max-clean-extents", "off"), 0);
  assert_int_equal (cfg.max_clean_extents, 0);
  assert_int_equal (engine_config_set (&cfg, "max-clean-extents", "1k"), 0);
  assert_int_equal (engine_config_set (&cfg, "max-clean-extents", "0"), 0);
  assert_int_equal (cfg.max_clean_extents, 0);
  assert_int_equal (engine_config_set (&cfg, "on-full", "explode"), -1);
  assert_int_equal (cfg.on_full, ON_FULL_FORWARD);
  assert_int_equal (engine_config_set (&cfg, "on-full", "drop"), 0);
  assert_int_equal (cfg.on_full, ON_FULL_DROP);
  assert_int_equal (engine_config_set (&cfg, "rate", "-5"), -1);
  assert_int_equal (engine_config_set (&cfg, "backend", "/dev/null"), 1);
  assert_true (engine_config_key_is_runtime ("delay"));
  assert_false (engine_config_key_is_runtime ("backend"));
  engine_config_free (&cfg);
}

/* small=: auto, off (or 0) and a size are three settings; a refused
 * value leaves the one in force.
 */
static void
test_small_key (void **state)
{
  struct engine_config cfg;

  engine_config_init (&cfg);
  assert_true (cfg.small_auto);
  assert_int_equal (engine_config_set (&cfg, "small", "64k"), 0);
  assert_false (cfg.small_auto);
  assert_int_equal (cfg.small, 65536);
  assert_int_equal (engine_config_set (&cfg, "small", "auto"), 0);
  assert_true (cfg.small_auto);
  assert_int_equal (cfg.small, 0);
  assert_int_equal (engine_config_set (&cfg, "small", "off"), 0);
  assert_false (cfg.small_auto);
  assert_int_equal (cfg.small, 0);
  assert_int_equal (engine_config_set (&cfg, "small", "32k"), 0);
  assert_int_equal (engine_config_set (&cfg, "small", "0"), 0);
  assert_false (cfg.small_auto);
  assert_int_equal (cfg.small, 0);
  assert_int_equal (engine_config_set (&cfg, "small", "16k"), 0);
  for (const char *const *v = (const char *const[]) { "Auto", "some", "-1",
                                                      "12x", "", NULL };
       *v != NULL; v++) {
    errno = 0;
    assert_int_equal (engine_config_set (&cfg, "small", *v), -1);
    assert_int_equal (errno, EINVAL);
    assert_false (cfg.small_auto);
    assert_int_equal (cfg.small, 16384);
  }
  engine_config_free (&cfg);
}

/* The service takes every layer's keys, and checks them together. */
static void
test_service_keys (void **state)
{
  struct service_config cfg;

  service_config_init (&cfg);
  assert_int_equal (service_config_set (&cfg, "nosuchkey", "1"), 1);
  assert_int_equal (service_config_set (&cfg, "backend", ""), -1);
  assert_int_equal (service_config_complete (&cfg), -1);
  assert_int_equal (service_config_set (&cfg, "backend", "/dev/null"), 0);
  assert_int_equal (service_config_complete (&cfg), 0);
  assert_int_equal (service_config_set (&cfg, "delay", "5s"), 0);
  assert_int_equal (cfg.engine.delay_ms, 5000);
  assert_int_equal (service_config_set (&cfg, "slot", "3000"), -1);
  assert_int_equal (service_config_set (&cfg, "slot", "128k"), 0);
  assert_int_equal (cfg.volume.slot, 128 * 1024);
  assert_int_equal (service_config_set (&cfg, "size", "1G"), 0);
  assert_int_equal (service_config_complete (&cfg), -1);
  assert_int_equal (service_config_set (&cfg, "thin", "on"), 0);
  assert_int_equal (service_config_complete (&cfg), -1);
  assert_int_equal (service_config_set (&cfg, "meta", "m.meta"), 0);
  assert_int_equal (cfg.volume.meta[0], '/');
  assert_int_equal (service_config_complete (&cfg), 0);
  service_config_free (&cfg);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_size),
    cmocka_unit_test (test_auto_size),
    cmocka_unit_test (test_duration),
    cmocka_unit_test (test_bool),
    cmocka_unit_test (test_scaled_count),
    cmocka_unit_test (test_config_keys),
    cmocka_unit_test (test_small_key),
    cmocka_unit_test (test_service_keys),
  };

  return cmocka_run_group_tests_name ("parse", tests, NULL, NULL);
}
