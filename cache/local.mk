include cache/extmap.mk

# The control protocol's pure parts: in the engine, and in discardctl.
noinst_LTLIBRARIES += libctlproto.la
libctlproto_la_SOURCES = cache/ctl-proto.c cache/ctl-proto.h

# The engine: everything a front-end needs except dc_error/dc_debug,
# which each front-end supplies (common/log.h).
noinst_LTLIBRARIES += libengine.la
libengine_la_SOURCES = \
	cache/ctl.c \
	cache/ctl.h \
	cache/ctl-commands.c \
	cache/ctl-internal.h \
	cache/engine-config.c \
	cache/engine-config.h \
	cache/engine.c \
	cache/engine.h \
	cache/engine-internal.h \
	cache/flusher.c \
	cache/forward.c \
	cache/pacing.c \
	cache/pacing.h \
	cache/policy.c \
	cache/policy.h \
	cache/state.c \
	cache/state.h \
	cache/state-file.c \
	cache/stats.c \
	cache/stats.h \
	cache/thin.c \
	cache/thin.h \
	cache/thin-engine.h \
	cache/thin-journal.c \
	cache/thin-map.c \
	common/crc32c.c \
	common/parse.c \
	common/parse.h
libengine_la_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS)
libengine_la_LIBADD = libextmap.la libbackend.la libctlproto.la $(ZSTD_LIBS)
