# SPDX-License-Identifier: BSD-3-Clause
# The control socket: the engine's side (flushes, the socket's life) and
# the protocol's pure parts as cmocka tests; the server under nbdkit and
# discardctl are scripts (tests/e2e/local.mk).
check_PROGRAMS += tests/unit/test-engine-ctl tests/unit/test-ctl-proto
TESTS += tests/unit/test-engine-ctl tests/unit/test-ctl-proto

tests_unit_test_engine_ctl_SOURCES = tests/unit/test-engine-ctl.c \
	tests/unit/scratch.c tests/unit/scratch.h $(engine_test_sources)
tests_unit_test_engine_ctl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_engine_ctl_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_engine_ctl_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)

tests_unit_test_ctl_proto_SOURCES = tests/unit/test-ctl-proto.c common/json-flat.c
tests_unit_test_ctl_proto_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_unit_test_ctl_proto_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_ctl_proto_LDADD = libctlproto.la $(CMOCKA_LIBS)

# The keeper's NBD handshake, driven against nbdkit by
# tests/e2e/test-nbd-handshake.sh (built with netlink only, as discardctl's
# attach is).
if HAVE_NETLINK
check_PROGRAMS += tests/unit/nbd-handshake-probe
tests_unit_nbd_handshake_probe_SOURCES = tests/unit/nbd-handshake-probe.c \
	keeper/nbd-handshake.c keeper/nbd-handshake.h
tests_unit_nbd_handshake_probe_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/keeper
tests_unit_nbd_handshake_probe_LDADD = libdclogstderr.la
else
EXTRA_DIST += tests/unit/nbd-handshake-probe.c
endif
