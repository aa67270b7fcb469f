# SPDX-License-Identifier: BSD-3-Clause
# The small-extent policy and the bounded stop (issue 23): unit tests on
# a virtual clock (an end-to-end stop with many tiny extents pending is
# a script, tests/e2e/local.mk).
check_PROGRAMS += tests/unit/test-small
TESTS += tests/unit/test-small
tests_unit_test_small_SOURCES = tests/unit/test-small.c $(engine_test_sources)
tests_unit_test_small_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit \
	-I$(top_srcdir)/cache
tests_unit_test_small_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_small_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)
