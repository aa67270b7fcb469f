# SPDX-License-Identifier: BSD-3-Clause
# Adaptive pacing (budget=): the cost model and decisions on synthetic
# samples (the flusher against slow device models under load is a
# script, tests/e2e/local.mk).
check_PROGRAMS += tests/unit/test-pacing
TESTS += tests/unit/test-pacing

tests_unit_test_pacing_SOURCES = tests/unit/test-pacing.c
tests_unit_test_pacing_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_pacing_LDADD = libengine.la libdclogstderr.la $(CMOCKA_LIBS)
