# SPDX-License-Identifier: BSD-3-Clause
# The extent map: a convenience library, linked by the engine, the
# front-ends, the tests and the benchmark: the tree core, its node
# pool, the queries and the self-check (extmap-internal.h is what they
# share).  Pure: it sees common/ and itself, nothing of the engine.
EXTMAP_CPPFLAGS = -I$(top_srcdir)/common -I$(top_srcdir)/cache/extmap
extmap_c_sources = cache/extmap/extmap.c cache/extmap/extmap-pool.c \
	cache/extmap/extmap-query.c cache/extmap/extmap-check.c
extmap_sources = $(extmap_c_sources) cache/extmap/extmap.h \
	cache/extmap/extmap-internal.h cache/extmap/README.md
noinst_LTLIBRARIES += libextmap.la
libextmap_la_SOURCES = $(extmap_sources)
libextmap_la_CPPFLAGS = $(EXTMAP_CPPFLAGS)
