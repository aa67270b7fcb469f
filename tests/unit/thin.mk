# SPDX-License-Identifier: BSD-3-Clause
# The reuse reserve's unit tests, beside the other thin-mode programs
# (engine.mk), sharing their thin-util.c.
check_PROGRAMS += tests/unit/test-thin-reserve
TESTS += tests/unit/test-thin-reserve
tests_unit_test_thin_reserve_SOURCES = tests/unit/test-thin-reserve.c $(thin_test_sources)
tests_unit_test_thin_reserve_CPPFLAGS = $(thin_test_cppflags)
tests_unit_test_thin_reserve_CFLAGS = $(thin_test_cflags)
tests_unit_test_thin_reserve_LDADD = $(thin_test_ldadd)
