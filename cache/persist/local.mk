# SPDX-License-Identifier: BSD-3-Clause
# The formats of the journal and the state file, in memory only (the
# files and the engine's side are cache/engine/engine-journal.c and
# engine-state.c), so that tests and fuzz targets decode any buffer.
PERSIST_CPPFLAGS = $(EXTMAP_CPPFLAGS) -I$(top_srcdir)/cache/persist
persist_c_sources = cache/persist/journal.c cache/persist/state.c \
	common/crc32c.c common/file-header.c
noinst_LTLIBRARIES += libpersist.la
libpersist_la_SOURCES = $(persist_c_sources) \
	cache/persist/journal.h cache/persist/state.h cache/persist/README.md
libpersist_la_CPPFLAGS = $(PERSIST_CPPFLAGS)
