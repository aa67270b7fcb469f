# SPDX-License-Identifier: BSD-3-Clause
# The volume layer: identity or thin, above the engine.  Its include
# path reaches the engine's public header, not the service's.
noinst_LTLIBRARIES += libvolume.la
libvolume_la_SOURCES = \
	volume/config.c \
	volume/identity.c \
	volume/range.c \
	volume/volume.c \
	volume/volume.h \
	volume/volume-internal.h \
	volume/thin/thin.c \
	volume/thin/thin-pure.h \
	volume/thin/thin-alloc.c \
	volume/thin/thin-internal.h \
	volume/thin/thin-stats.h \
	volume/thin/thin-journal.c \
	volume/thin/thin-map.c \
	volume/thin/thin-meta.c \
	volume/thin/thin-meta-v1.c \
	volume/thin/thin-open.c \
	volume/thin/thin-order.c \
	volume/thin/thin-order.h \
	volume/thin/thin-recover.c \
	volume/thin/thin-reserve.c \
	volume/thin/thin-space.c \
	volume/thin/thin-volume.h
libvolume_la_CPPFLAGS = $(VOLUME_CPPFLAGS)
libvolume_la_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS)
libvolume_la_LIBADD = libengine.la $(ZSTD_LIBS)
