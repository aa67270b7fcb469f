# SPDX-License-Identifier: BSD-3-Clause
# nbdkit filters that only the tests load (--filter=PATH/.libs/NAME.so):
# faults nbdkit's own filters cannot inject.  Shared modules, never
# installed (-rpath only makes libtool build a .so).
check_LTLIBRARIES += tests/filters/nbdkit-enotsup-filter.la
tests_filters_nbdkit_enotsup_filter_la_SOURCES = tests/filters/enotsup.c
tests_filters_nbdkit_enotsup_filter_la_CFLAGS = $(AM_CFLAGS) $(NBDKIT_CFLAGS)
tests_filters_nbdkit_enotsup_filter_la_LDFLAGS = \
	$(AM_LDFLAGS) -module -avoid-version -shared -rpath /nowhere

# A device model whose trims cost a + b * length (pacing tests, bench).
check_LTLIBRARIES += tests/filters/nbdkit-trimcost-filter.la
tests_filters_nbdkit_trimcost_filter_la_SOURCES = tests/filters/trimcost.c
tests_filters_nbdkit_trimcost_filter_la_CFLAGS = $(AM_CFLAGS) $(NBDKIT_CFLAGS)
tests_filters_nbdkit_trimcost_filter_la_LDFLAGS = \
	$(AM_LDFLAGS) -module -avoid-version -shared -rpath /nowhere
