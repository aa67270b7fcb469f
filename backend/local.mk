# SPDX-License-Identifier: BSD-3-Clause
# backend: the storage backends behind the engine (backend.h), one
# convenience library for the front-ends and the tests.
noinst_HEADERS += \
	backend/backend.h \
	backend/internal.h

noinst_LTLIBRARIES += libbackend.la
libbackend_la_SOURCES = \
	backend/backend.c \
	backend/impl.c \
	backend/stable-id.c \
	backend/errno-map.c \
	backend/fd.c \
	backend/file.c \
	backend/lock.c \
	backend/blkdev.c \
	backend/nbd.c \
	backend/nbd-conn.c \
	backend/nbd-internal.h
libbackend_la_CFLAGS = $(AM_CFLAGS) $(LIBNBD_CFLAGS)
libbackend_la_LIBADD = $(LIBNBD_LIBS) $(RBD_LIBS)
include backend/rbd/local.mk
