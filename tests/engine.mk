# SPDX-License-Identifier: BSD-3-Clause
# Engine unit tests against the in-memory backend, and parser tests.
check_LTLIBRARIES += tests/libmembackend.la
tests_libmembackend_la_SOURCES = tests/unit/mem-backend.c tests/unit/mem-backend.h
tests_libmembackend_la_LIBADD = libservice.la libdclogstderr.la

check_PROGRAMS += tests/unit/test-engine tests/unit/test-clean \
	tests/unit/test-parse tests/unit/test-grow tests/unit/test-arith
TESTS += tests/unit/test-engine tests/unit/test-clean tests/unit/test-parse \
	tests/unit/test-grow tests/unit/test-arith

tests_unit_test_engine_SOURCES = tests/unit/test-engine.c
tests_unit_test_engine_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_engine_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_engine_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)

# The known-clean map (invariant 9).
tests_unit_test_clean_SOURCES = tests/unit/test-clean.c
tests_unit_test_clean_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_clean_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_clean_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)

tests_unit_test_parse_SOURCES = tests/unit/test-parse.c
tests_unit_test_parse_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_parse_LDADD = libservice.la libdclogstderr.la $(CMOCKA_LIBS)

tests_unit_test_grow_SOURCES = tests/unit/test-grow.c
tests_unit_test_grow_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_grow_LDADD = $(CMOCKA_LIBS)

tests_unit_test_arith_SOURCES = tests/unit/test-arith.c
tests_unit_test_arith_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_arith_LDADD = $(CMOCKA_LIBS)

# The flusher's liveness, a property over a virtual clock.
check_PROGRAMS += tests/unit/test-liveness
TESTS += tests/unit/test-liveness
tests_unit_test_liveness_SOURCES = tests/unit/test-liveness.c
tests_unit_test_liveness_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_liveness_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_liveness_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)

# Thin mode: allocator, journal, recovery (cmocka, in-memory backend).
check_PROGRAMS += tests/unit/test-thin
TESTS += tests/unit/test-thin
tests_unit_test_thin_SOURCES = tests/unit/test-thin.c \
	tests/unit/scratch.c tests/unit/scratch.h
tests_unit_test_thin_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_thin_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_thin_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)
