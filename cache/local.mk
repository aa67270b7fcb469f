# SPDX-License-Identifier: BSD-3-Clause
include cache/extmap.mk

# The engine, the discard cache: the bottom layer above the backends.
# dc_error/dc_debug come from whoever links it (common/log.h).  Its
# include path holds no volume or service header: nothing calls up.
noinst_LTLIBRARIES += libengine.la
libengine_la_SOURCES = \
	cache/breaker.c \
	cache/breaker.h \
	cache/clean.c \
	cache/clean.h \
	cache/engine-config.c \
	cache/engine-config.h \
	cache/engine.c \
	cache/engine-admin.c \
	cache/engine.h \
	cache/engine-stats.h \
	cache/engine-internal.h \
	cache/engine-test.h \
	cache/flusher.c \
	cache/forward.c \
	cache/journal.c \
	cache/journal.h \
	cache/journal-file.c \
	cache/pacing.c \
	cache/pacing.h \
	cache/proof.c \
	cache/proof.h \
	cache/protect.c \
	cache/policy.c \
	cache/policy.h \
	cache/pressure.c \
	cache/small.c \
	cache/small.h \
	cache/state.c \
	cache/state.h \
	cache/state-file.c \
	cache/window.c \
	cache/window.h \
	common/crc32c.c \
	common/file-header.c \
	common/file-header.h \
	common/parse.c \
	common/parse.h \
	common/reclog.h
libengine_la_CPPFLAGS = $(ENGINE_CPPFLAGS)
libengine_la_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS)
libengine_la_LIBADD = libextmap.la libbackend.la $(ZSTD_LIBS)
