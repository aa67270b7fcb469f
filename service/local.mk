# SPDX-License-Identifier: BSD-3-Clause
# The service layer, what both front-ends share: the keys, the
# lifecycle, the control server and the statistics' formats.
noinst_LTLIBRARIES += libservice.la
libservice_la_SOURCES = \
	service/config.c \
	service/ctl.c \
	service/ctl.h \
	service/ctl-commands.c \
	service/ctl-internal.h \
	service/keys.h \
	service/keys-help.c \
	service/service.c \
	service/service.h \
	service/stats.c \
	service/stats.h \
	service/tick.c \
	service/tick.h
libservice_la_CPPFLAGS = $(SERVICE_CPPFLAGS)
libservice_la_LIBADD = libvolume.la libctlproto.la libstatstable.la

# The control protocol's pure parts: in the server, and in discardctl.
noinst_LTLIBRARIES += libctlproto.la
libctlproto_la_SOURCES = service/ctl-proto.c service/ctl-proto.h

# The statistics' descriptors (stats-table.h): in the server, and in
# discardctl, which names each statistic it shows by them.
noinst_LTLIBRARIES += libstatstable.la
libstatstable_la_SOURCES = service/stats-table.c service/stats-table.h
libstatstable_la_CPPFLAGS = $(SERVICE_CPPFLAGS)
