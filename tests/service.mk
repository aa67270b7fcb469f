# SPDX-License-Identifier: BSD-3-Clause
# The service layer as a user meets it: failing before serving; the
# lock on a regular-file backend.  (Its table of keys is checked in
# tests/lint/.)
SERVICE_TESTS = \
	tests/e2e/test-start-checks.sh \
	tests/e2e/test-backend-lock.sh
TESTS += $(SERVICE_TESTS)
EXTRA_DIST += $(SERVICE_TESTS)
