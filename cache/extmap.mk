# SPDX-License-Identifier: BSD-3-Clause
# The extent map: a convenience library, linked by the engine, the
# front-ends, the tests and the benchmark: the tree core, its node
# pool, the queries and the self-check (extmap-internal.h is what they
# share).
extmap_c_sources = cache/extmap.c cache/extmap-pool.c cache/extmap-query.c \
	cache/extmap-check.c
extmap_sources = $(extmap_c_sources) cache/extmap.h cache/extmap-internal.h
noinst_LTLIBRARIES += libextmap.la
libextmap_la_SOURCES = $(extmap_sources)
