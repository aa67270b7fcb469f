# SPDX-License-Identifier: BSD-3-Clause
noinst_HEADERS += \
	common/arith.h \
	common/clock.h \
	common/cleanup.h \
	common/crc32c.h \
	common/fileio.h \
	common/grow.h \
	common/json-flat.h \
	common/le.h \
	common/lock.h \
	common/reclog.h \
	common/log.h \
	common/log-stderr.h \
	common/splitmix.h \
	common/stats-def.h \
	common/strdup-null.h \
	common/verify.h \
	common/varint.h

# Programs that are not the nbdkit plugin link this for dc_error/dc_debug.
noinst_LTLIBRARIES += libdclogstderr.la
libdclogstderr_la_SOURCES = common/log-stderr.c
