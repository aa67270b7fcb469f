# SPDX-License-Identifier: BSD-3-Clause
# The service layer as a user meets it: the one table of keys against
# --help, the man pages and the README; failing before serving; the
# lock on a regular-file backend.
check_PROGRAMS += tests/keys-table
tests_keys_table_SOURCES = tests/keys-table.c
tests_keys_table_LDADD = libservice.la libdclogstderr.la

SERVICE_TESTS = \
	tests/test-keys.sh \
	tests/test-start-checks.sh \
	tests/test-backend-lock.sh
TESTS += $(SERVICE_TESTS)
EXTRA_DIST += $(SERVICE_TESTS)
