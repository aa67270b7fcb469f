# SPDX-License-Identifier: BSD-3-Clause
# The statistics: the one table and everything written from it (the
# server's JSON, discardctl's table and Prometheus text).
check_PROGRAMS += tests/unit/test-stats-format
TESTS += tests/unit/test-stats-format

tests_unit_test_stats_format_SOURCES = tests/unit/test-stats-format.c \
	tools/stats-format.c tools/human.c common/json-flat.c
tests_unit_test_stats_format_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_unit_test_stats_format_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_stats_format_LDADD = libservice.la libdclogstderr.la $(CMOCKA_LIBS)
