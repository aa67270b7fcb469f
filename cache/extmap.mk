# SPDX-License-Identifier: BSD-3-Clause
# The extent map: a convenience library, linked by the engine, the
# front-ends, the tests and the benchmark.
noinst_LTLIBRARIES += libextmap.la
libextmap_la_SOURCES = cache/extmap.c cache/extmap.h
