# SPDX-License-Identifier: BSD-3-Clause
# Invariant 11: the circuit breaker's state machine, the forwarding
# windows, and both in the engine (under nbdkit, with proof of effect:
# tests/e2e/local.mk).
check_PROGRAMS += tests/unit/test-protect
TESTS += tests/unit/test-protect
tests_unit_test_protect_SOURCES = tests/unit/test-protect.c \
	$(engine_test_sources)
tests_unit_test_protect_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_protect_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_protect_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)
