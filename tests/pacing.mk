# SPDX-License-Identifier: BSD-3-Clause
# Adaptive pacing (budget=): the cost model and decisions on synthetic
# samples, and the flusher against slow device models under load.
check_PROGRAMS += tests/unit/test-pacing
TESTS += tests/unit/test-pacing tests/e2e/test-pacing.sh
EXTRA_DIST += tests/e2e/test-pacing.sh

tests_unit_test_pacing_SOURCES = tests/unit/test-pacing.c
tests_unit_test_pacing_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_pacing_LDADD = libengine.la libdclogstderr.la $(CMOCKA_LIBS)
