# SPDX-License-Identifier: BSD-3-Clause
# The state file: its format, the save at a clean stop and the load at
# start through the engine (cmocka, in-memory backend); restarts of
# nbdkit are a script (tests/e2e/local.mk).
check_PROGRAMS += tests/unit/test-state
TESTS += tests/unit/test-state
tests_unit_test_state_SOURCES = tests/unit/test-state.c \
	tests/unit/scratch.c tests/unit/scratch.h $(engine_test_sources)
tests_unit_test_state_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_state_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_state_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)
