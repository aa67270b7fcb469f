# SPDX-License-Identifier: BSD-3-Clause
# The Ceph group: the RBD backend on a throwaway single-node cluster
# (tests/ceph/cluster), one cluster for all of its cases.
EXTRA_DIST += tests/ceph/cluster tests/ceph/ceph-lib.sh tests/ceph/nbd-op
CEPH_TESTS = tests/ceph/test-ceph.sh
TESTS += $(CEPH_TESTS)
EXTRA_DIST += $(CEPH_TESTS)

# The spec parser needs no cluster, only the build's RBD backend.
if HAVE_RBD
check_PROGRAMS += tests/unit/test-rbd-spec
TESTS += tests/unit/test-rbd-spec
tests_unit_test_rbd_spec_SOURCES = tests/unit/test-rbd-spec.c
tests_unit_test_rbd_spec_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/backend/rbd
tests_unit_test_rbd_spec_CFLAGS = $(backend_test_cflags)
tests_unit_test_rbd_spec_LDADD = $(backend_test_ldadd)
endif
EXTRA_DIST += tests/unit/test-rbd-spec.c
