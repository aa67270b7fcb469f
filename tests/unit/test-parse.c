/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the value parsers and engine_config_set. */
#include <config.h>

#include <errno.h>
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
  uint64_t v = 7;

  assert_int_equal (parse_duration_ms ("d", "30", &v), 0);
  assert_int_equal (v, 30000);
  assert_int_equal (parse_duration_ms ("d", "30s", &v), 0);
  assert_int_equal (v, 30000);
  assert_int_equal (parse_duration_ms ("d", "200ms", &v), 0);
  assert_int_equal (v, 200);
  assert_int_equal (parse_duration_ms ("d", "2m", &v), 0);
  assert_int_equal (v, 120000);
  assert_int_equal (parse_duration_ms ("d", "1h", &v), 0);
  assert_int_equal (v, 3600000);
  v = 7;
  const char *bad[] = { "", "-1s", "1sec", "ms", "1.5s", "soon", "1 s" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal (parse_duration_ms ("d", bad[i], &v), -1);
    assert_int_equal (v, 7);
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
    cmocka_unit_test (test_service_keys),
  };

  return cmocka_run_group_tests_name ("parse", tests, NULL, NULL);
}
