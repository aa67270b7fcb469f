# SPDX-License-Identifier: BSD-3-Clause
# Issue 24: the journal of the pending set (invariant 10); its crashes
# and space pressure (low-water=) are scripts (tests/e2e/local.mk).
check_PROGRAMS += tests/unit/test-journal
TESTS += tests/unit/test-journal
tests_unit_test_journal_SOURCES = tests/unit/test-journal.c \
	tests/unit/scratch.c tests/unit/scratch.h $(engine_test_sources)
tests_unit_test_journal_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit \
	-I$(top_srcdir)/cache
tests_unit_test_journal_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_journal_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)
