# SPDX-License-Identifier: BSD-3-Clause
# Ceph's libraries loaded for backend=rbd: only (backend/rbd/rbd-lib.c); that
# they are not linked into the plugin nor discardfuse, and the refusal
# without them, are scripts (tests/packaging/, tests/e2e/).
if HAVE_RBD
check_PROGRAMS += tests/unit/test-rbd-lib
TESTS += tests/unit/test-rbd-lib
tests_unit_test_rbd_lib_SOURCES = tests/unit/test-rbd-lib.c
tests_unit_test_rbd_lib_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/backend/rbd
tests_unit_test_rbd_lib_CFLAGS = $(backend_test_cflags)
tests_unit_test_rbd_lib_LDADD = $(backend_test_ldadd)
endif
EXTRA_DIST += tests/unit/test-rbd-lib.c
