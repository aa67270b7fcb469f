# SPDX-License-Identifier: BSD-3-Clause
include cache/extmap.mk

# The engine, the discard cache: the bottom layer above the backends.
# dc_error/dc_debug come from whoever links it (common/log.h).  Its
# include path holds no volume or service header: nothing calls up.
noinst_LTLIBRARIES += libengine.la
libengine_la_SOURCES = \
	cache/clean.c \
	cache/clean.h \
	cache/engine-config.c \
	cache/engine-config.h \
	cache/engine.c \
	cache/engine.h \
	cache/engine-internal.h \
	cache/engine-test.h \
	cache/flusher.c \
	cache/forward.c \
	cache/pacing.c \
	cache/pacing.h \
	cache/policy.c \
	cache/policy.h \
	cache/small.c \
	cache/small.h \
	cache/state.c \
	cache/state.h \
	cache/state-file.c \
	common/crc32c.c \
	common/parse.c \
	common/parse.h
libengine_la_CPPFLAGS = $(ENGINE_CPPFLAGS)
libengine_la_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS)
libengine_la_LIBADD = libextmap.la libbackend.la $(ZSTD_LIBS)
