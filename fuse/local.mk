# SPDX-License-Identifier: BSD-3-Clause
# discardfuse: the engine behind a FUSE mount holding one image file, for
# losetup.  Installed in bin with its man page.
bin_PROGRAMS += fuse/discardfuse
fuse_discardfuse_SOURCES = \
	fuse/discardfuse.h \
	fuse/args.c \
	fuse/disk.c \
	fuse/main.c \
	fuse/ops.c \
	fuse/statsnode.c
fuse_discardfuse_CFLAGS = $(AM_CFLAGS) $(FUSE3_CFLAGS)
fuse_discardfuse_LDADD = libservice.la libdclogstderr.la $(FUSE3_LIBS) $(LIBNBD_LIBS)

man1_MANS += fuse/discardfuse.1
EXTRA_DIST += fuse/discardfuse.pod
CLEANFILES += fuse/discardfuse.1

fuse/discardfuse.1: fuse/discardfuse.pod
	$(AM_V_GEN)$(MKDIR_P) fuse && \
	$(POD2MAN) --section=1 --center="discardcache" --release="$(PACKAGE_VERSION)" \
	  --name=discardfuse $< > $@.tmp && mv $@.tmp $@
