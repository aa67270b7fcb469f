# SPDX-License-Identifier: BSD-3-Clause
# keeper/: the daemon that keeps /dev/nbdN attached across server
# restarts (keeper/README.md).  `discardctl attach` runs it; it is a
# convenience library linked into discardctl when libnl-genl-3 is there.
keeper_sources = \
	keeper/keeper.c \
	keeper/keeper.h \
	keeper/nbd-handshake.c \
	keeper/nbd-handshake.h \
	keeper/nbd-netlink.c \
	keeper/nbd-netlink.h \
	keeper/README.md
if HAVE_NETLINK
noinst_LTLIBRARIES += libkeeper.la
libkeeper_la_SOURCES = $(keeper_sources)
libkeeper_la_CFLAGS = $(AM_CFLAGS) $(LIBNL_CFLAGS)
else
EXTRA_DIST += $(keeper_sources)
endif
