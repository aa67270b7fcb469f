# SPDX-License-Identifier: BSD-3-Clause
# The extent map, shared by the engine (cache/) and thin mode
# (volume/thin/): a convenience library, linked by both, the tests and
# the benchmark: the tree core, its node pool, the queries and the
# self-check (extmap-internal.h is what they share).  Pure: it sees
# common/ and itself, nothing above it.
EXTMAP_CPPFLAGS = -I$(top_srcdir)/common -I$(top_srcdir)/extmap
extmap_c_sources = extmap/extmap.c extmap/extmap-pool.c \
	extmap/extmap-query.c extmap/extmap-check.c
extmap_sources = $(extmap_c_sources) extmap/extmap.h \
	extmap/extmap-internal.h extmap/README.md
noinst_LTLIBRARIES += libextmap.la
libextmap_la_SOURCES = $(extmap_sources)
libextmap_la_CPPFLAGS = $(EXTMAP_CPPFLAGS)
