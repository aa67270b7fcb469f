# SPDX-License-Identifier: BSD-3-Clause
# discardublk: the engine as a ublk block device, /dev/ublkbN (Linux
# 6.0+).  Built only with liburing (Debian: liburing-dev); installed in
# bin with its man page.
if HAVE_LIBURING
bin_PROGRAMS += ublk/discardublk
ublk_discardublk_SOURCES = \
	ublk/discardublk.h \
	ublk/args.c \
	ublk/ctrl.c \
	ublk/io.c \
	ublk/main.c \
	ublk/params.c \
	ublk/queue.c \
	ublk/workers.c
ublk_discardublk_CFLAGS = $(AM_CFLAGS) $(LIBURING_CFLAGS)
ublk_discardublk_LDADD = libservice.la libdclogstderr.la $(LIBURING_LIBS) $(LIBNBD_LIBS)

man1_MANS += ublk/discardublk.1
CLEANFILES += ublk/discardublk.1

ublk/discardublk.1: ublk/discardublk.pod
	$(AM_V_GEN)$(MKDIR_P) ublk && \
	$(POD2MAN) --section=1 --center="discardcache" --release="$(PACKAGE_VERSION)" \
	  --name=discardublk $< > $@.tmp && mv $@.tmp $@
endif
EXTRA_DIST += ublk/discardublk.pod
