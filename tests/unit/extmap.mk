# SPDX-License-Identifier: BSD-3-Clause
# Extent map tests (cmocka).  Each runs twice: against libextmap.la and
# against a build with tiny nodes (5 extents a leaf, 4 children, slabs
# of 8 and 64 nodes), where a few hundred extents already make a tree of
# five or six levels, so every split, merge and slab release is reached.
# The -small test programs get EXTMAP_SMALL_NODES too, to skip the
# memory-density checks that only mean something with real nodes.
check_LTLIBRARIES += libextmap-small.la
libextmap_small_la_SOURCES = $(extmap_sources)
libextmap_small_la_CPPFLAGS = $(AM_CPPFLAGS) -DEXTMAP_SMALL_NODES

extmap_tests = \
	tests/unit/test-extmap \
	tests/unit/test-extmap-small \
	tests/unit/test-extmap-diff \
	tests/unit/test-extmap-diff-small
check_PROGRAMS += $(extmap_tests)
TESTS += $(extmap_tests)

tests_unit_test_extmap_SOURCES = tests/unit/test-extmap.c
tests_unit_test_extmap_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_extmap_LDADD = libextmap.la libdclogstderr.la $(CMOCKA_LIBS)

tests_unit_test_extmap_small_SOURCES = tests/unit/test-extmap.c
tests_unit_test_extmap_small_CPPFLAGS = $(AM_CPPFLAGS) -DEXTMAP_SMALL_NODES
tests_unit_test_extmap_small_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_extmap_small_LDADD = libextmap-small.la libdclogstderr.la $(CMOCKA_LIBS)

# The reference model is shared with the fuzz target (tests/fuzz/).
extmap_ref_sources = tests/unit/extmap-ref.c tests/unit/extmap-ref.h

tests_unit_test_extmap_diff_SOURCES = tests/unit/test-extmap-diff.c $(extmap_ref_sources)
tests_unit_test_extmap_diff_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_extmap_diff_LDADD = libextmap.la libdclogstderr.la $(CMOCKA_LIBS)

tests_unit_test_extmap_diff_small_SOURCES = tests/unit/test-extmap-diff.c $(extmap_ref_sources)
tests_unit_test_extmap_diff_small_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_extmap_diff_small_LDADD = libextmap-small.la libdclogstderr.la $(CMOCKA_LIBS)
