# SPDX-License-Identifier: BSD-3-Clause
# backend tests: backend_open and the file backend as a cmocka unit test;
# the block device backend on a real loop device and the nbd backend
# against nbdkit, each a script (tests/e2e/local.mk) driving a test
# program with arguments.
check_PROGRAMS += \
	tests/unit/test-backend-errno \
	tests/unit/test-backend-file \
	tests/unit/test-backend-blkdev \
	tests/unit/test-backend-nbd
TESTS += tests/unit/test-backend-errno tests/unit/test-backend-file

backend_test_sources = tests/unit/test-backend-util.c tests/unit/test-backend-util.h
backend_test_cflags = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
backend_test_ldadd = libbackend.la libdclogstderr.la $(CMOCKA_LIBS)

tests_unit_test_backend_errno_SOURCES = tests/unit/test-backend-errno.c
tests_unit_test_backend_errno_CFLAGS = $(backend_test_cflags)
tests_unit_test_backend_errno_LDADD = $(backend_test_ldadd)

tests_unit_test_backend_file_SOURCES = tests/unit/test-backend-file.c $(backend_test_sources)
tests_unit_test_backend_file_CFLAGS = $(backend_test_cflags)
tests_unit_test_backend_file_LDADD = $(backend_test_ldadd)

tests_unit_test_backend_blkdev_SOURCES = tests/unit/test-backend-blkdev.c $(backend_test_sources)
tests_unit_test_backend_blkdev_CFLAGS = $(backend_test_cflags)
tests_unit_test_backend_blkdev_LDADD = $(backend_test_ldadd)

tests_unit_test_backend_nbd_SOURCES = tests/unit/test-backend-nbd.c $(backend_test_sources)
tests_unit_test_backend_nbd_CFLAGS = $(backend_test_cflags)
tests_unit_test_backend_nbd_LDADD = $(backend_test_ldadd)
