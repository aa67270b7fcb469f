# SPDX-License-Identifier: BSD-3-Clause
# Engine unit tests against the in-memory backend, and parser tests.
check_LTLIBRARIES += tests/libmembackend.la
tests_libmembackend_la_SOURCES = tests/unit/mem-backend.c tests/unit/mem-backend.h
tests_libmembackend_la_LIBADD = libservice.la libdclogstderr.la

check_PROGRAMS += tests/unit/test-engine tests/unit/test-clean \
	tests/unit/test-parse tests/unit/test-grow tests/unit/test-arith
TESTS += tests/unit/test-engine tests/unit/test-clean tests/unit/test-parse \
	tests/unit/test-grow tests/unit/test-arith

# What the engine's cmocka tests share: an engine on the in-memory
# backend, its statistics, a virtual clock.
engine_test_sources = tests/unit/engine-util.c tests/unit/engine-util.h

tests_unit_test_engine_SOURCES = tests/unit/test-engine.c $(engine_test_sources)
tests_unit_test_engine_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_engine_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_engine_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)

# The known-clean map (invariant 9).
tests_unit_test_clean_SOURCES = tests/unit/test-clean.c $(engine_test_sources)
tests_unit_test_clean_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_clean_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_clean_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)

tests_unit_test_parse_SOURCES = tests/unit/test-parse.c
tests_unit_test_parse_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_parse_LDADD = libservice.la libdclogstderr.la $(CMOCKA_LIBS)

tests_unit_test_grow_SOURCES = tests/unit/test-grow.c
tests_unit_test_grow_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_grow_LDADD = $(CMOCKA_LIBS)

# The one atomic file replace (common/fileio.h).
check_PROGRAMS += tests/unit/test-fileio
TESTS += tests/unit/test-fileio
tests_unit_test_fileio_SOURCES = tests/unit/test-fileio.c tests/unit/scratch.c \
	tests/unit/scratch.h
tests_unit_test_fileio_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_fileio_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_fileio_LDADD = $(CMOCKA_LIBS)

# Deadlines and the monotonic condition variables they are for.
check_PROGRAMS += tests/unit/test-clock
TESTS += tests/unit/test-clock
tests_unit_test_clock_SOURCES = tests/unit/test-clock.c
tests_unit_test_clock_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_clock_LDADD = $(CMOCKA_LIBS)

tests_unit_test_arith_SOURCES = tests/unit/test-arith.c
tests_unit_test_arith_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_arith_LDADD = $(CMOCKA_LIBS)

# The flusher's liveness, a property over a virtual clock.
check_PROGRAMS += tests/unit/test-liveness
TESTS += tests/unit/test-liveness
tests_unit_test_liveness_SOURCES = tests/unit/test-liveness.c \
	$(engine_test_sources)
tests_unit_test_liveness_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_liveness_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_liveness_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)

# Thin mode, one program a part (cmocka, in-memory backend): the map,
# the free space, the allocator, the data path and geometry, the meta
# file (journal, checkpoints, recovery); thin-util.c is what they share.
thin_unit_tests = tests/unit/test-thin-map tests/unit/test-thin-space \
	tests/unit/test-thin-alloc tests/unit/test-thin-io \
	tests/unit/test-thin-journal
check_PROGRAMS += $(thin_unit_tests)
TESTS += $(thin_unit_tests)
EXTRA_DIST += tests/unit/thin-meta-v1.img
thin_test_sources = tests/unit/thin-util.c tests/unit/thin-util.h \
	tests/unit/scratch.c tests/unit/scratch.h
thin_test_cppflags = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
thin_test_cflags = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
thin_test_ldadd = tests/libmembackend.la $(CMOCKA_LIBS)
tests_unit_test_thin_map_SOURCES = tests/unit/test-thin-map.c $(thin_test_sources)
tests_unit_test_thin_map_CPPFLAGS = $(thin_test_cppflags)
tests_unit_test_thin_map_CFLAGS = $(thin_test_cflags)
tests_unit_test_thin_map_LDADD = $(thin_test_ldadd)
tests_unit_test_thin_space_SOURCES = tests/unit/test-thin-space.c $(thin_test_sources)
tests_unit_test_thin_space_CPPFLAGS = $(thin_test_cppflags)
tests_unit_test_thin_space_CFLAGS = $(thin_test_cflags)
tests_unit_test_thin_space_LDADD = $(thin_test_ldadd)
tests_unit_test_thin_alloc_SOURCES = tests/unit/test-thin-alloc.c $(thin_test_sources)
tests_unit_test_thin_alloc_CPPFLAGS = $(thin_test_cppflags)
tests_unit_test_thin_alloc_CFLAGS = $(thin_test_cflags)
tests_unit_test_thin_alloc_LDADD = $(thin_test_ldadd)
tests_unit_test_thin_io_SOURCES = tests/unit/test-thin-io.c $(thin_test_sources)
tests_unit_test_thin_io_CPPFLAGS = $(thin_test_cppflags)
tests_unit_test_thin_io_CFLAGS = $(thin_test_cflags)
tests_unit_test_thin_io_LDADD = $(thin_test_ldadd)
tests_unit_test_thin_journal_SOURCES = tests/unit/test-thin-journal.c $(thin_test_sources)
tests_unit_test_thin_journal_CPPFLAGS = $(thin_test_cppflags)
tests_unit_test_thin_journal_CFLAGS = $(thin_test_cflags)
tests_unit_test_thin_journal_LDADD = $(thin_test_ldadd)
