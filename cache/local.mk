# SPDX-License-Identifier: BSD-3-Clause
include cache/extmap/local.mk
include cache/policy/local.mk
include cache/protect/local.mk
include cache/persist/local.mk

# The engine, the discard cache: the bottom layer above the backends.
# Every file at the top of cache/ is the engine itself and works under
# its lock (engine-internal.h); the folders below it are pure libraries
# that never include that header (cache/README.md).  dc_error/dc_debug
# come from whoever links it (common/log.h).  Its include path holds no
# volume or service header: nothing calls up.
noinst_LTLIBRARIES += libengine.la
libengine_la_SOURCES = \
	cache/engine.c \
	cache/engine.h \
	cache/engine-admin.c \
	cache/engine-config.c \
	cache/engine-config.h \
	cache/engine-flusher.c \
	cache/engine-forward.c \
	cache/engine-internal.h \
	cache/engine-journal.c \
	cache/engine-pending.c \
	cache/engine-pressure.c \
	cache/engine-proof.c \
	cache/engine-protect.c \
	cache/engine-small.c \
	cache/engine-state.c \
	cache/engine-stats.h \
	cache/engine-test.h \
	cache/README.md \
	common/parse.c \
	common/parse.h \
	common/reclog.h
libengine_la_CPPFLAGS = $(ENGINE_CPPFLAGS)
libengine_la_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS)
libengine_la_LIBADD = libpolicy.la libprotect.la libpersist.la libextmap.la \
	libbackend.la $(ZSTD_LIBS)
