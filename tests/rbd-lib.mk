# SPDX-License-Identifier: BSD-3-Clause
# Ceph's libraries loaded for backend=rbd: only (backend/rbd-lib.c): not
# linked into the plugin nor discardfuse, and a clear refusal without
# them.
RBD_LIB_TESTS = tests/packaging/test-rbd-not-linked.sh
if HAVE_RBD
check_PROGRAMS += tests/unit/test-rbd-lib
TESTS += tests/unit/test-rbd-lib
tests_unit_test_rbd_lib_SOURCES = tests/unit/test-rbd-lib.c
tests_unit_test_rbd_lib_CFLAGS = $(backend_test_cflags)
tests_unit_test_rbd_lib_LDADD = $(backend_test_ldadd)
RBD_LIB_TESTS += tests/e2e/test-rbd-missing.sh
endif
TESTS += $(RBD_LIB_TESTS)
EXTRA_DIST += tests/unit/test-rbd-lib.c tests/packaging/test-rbd-not-linked.sh \
	tests/e2e/test-rbd-missing.sh
