# SPDX-License-Identifier: BSD-3-Clause
# The executable contracts (common/verify.h): each module's checks made
# to fire in a child process, which must die of SIGABRT naming the check
# (cmocka, the in-memory backend and thin mode's test helpers).
check_PROGRAMS += tests/unit/test-verify
TESTS += tests/unit/test-verify
tests_unit_test_verify_SOURCES = tests/unit/test-verify.c $(thin_test_sources)
tests_unit_test_verify_CPPFLAGS = $(thin_test_cppflags)
tests_unit_test_verify_CFLAGS = $(thin_test_cflags)
tests_unit_test_verify_LDADD = $(thin_test_ldadd)
