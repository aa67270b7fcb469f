# SPDX-License-Identifier: BSD-3-Clause
# The engine, the discard cache: the bottom layer above the backends.
# Every file in cache/engine/ is the engine itself and works under its
# lock (engine-internal.h); cache/'s other folders are pure libraries
# that never include that header (cache/README.md).  dc_error/dc_debug
# come from whoever links it (common/log.h).  Its include path holds no
# volume or service header: nothing calls up.
noinst_LTLIBRARIES += libengine.la
libengine_la_SOURCES = \
	cache/engine/engine.c \
	cache/engine/engine.h \
	cache/engine/engine-admin.c \
	cache/engine/engine-config.c \
	cache/engine/engine-config.h \
	cache/engine/engine-flusher.c \
	cache/engine/engine-forward.c \
	cache/engine/engine-internal.h \
	cache/engine/engine-journal.c \
	cache/engine/engine-pending.c \
	cache/engine/engine-pressure.c \
	cache/engine/engine-proof.c \
	cache/engine/engine-protect.c \
	cache/engine/engine-small.c \
	cache/engine/engine-state.c \
	cache/engine/engine-stats.h \
	cache/engine/engine-test.h \
	cache/engine/README.md \
	common/parse.c \
	common/parse.h \
	common/reclog.h
libengine_la_CPPFLAGS = $(ENGINE_CPPFLAGS)
libengine_la_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS)
libengine_la_LIBADD = libpolicy.la libprotect.la libpersist.la libextmap.la \
	libbackend.la $(ZSTD_LIBS)
