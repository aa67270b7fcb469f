# SPDX-License-Identifier: BSD-3-Clause
# Test programs and scripts.  Each folder keeps its rules in its own
# local.mk, beside the tests they build (tests/unit/ one fragment a
# concern); all of them run under automake's parallel test harness.
TEST_EXTENSIONS = .sh
EXTRA_DIST += tests/functions.sh

# First: the guest tests are the longest, and the parallel harness starts
# tests in the order of TESTS.
include tests/guest/local.mk
include tests/unit/local.mk
include tests/e2e/local.mk
include tests/packaging/local.mk
include tests/ceph/local.mk
include tests/fuzz/local.mk
include tests/lint/local.mk
include tests/verifier/local.mk
include tests/filters/local.mk
include tests/sanitizer/local.mk
include tests/ublk/local.mk

# Tests of the plugin running under nbdkit.
EXTRA_DIST += tests/e2e/e2e-lib.sh tests/e2e/churn.py tests/e2e/thin-crash.py
PLUGIN_TESTS = \
	tests/e2e/test-plugin-params.sh \
	tests/e2e/test-plugin-integration.sh \
	tests/e2e/test-inflight-race.sh \
	tests/e2e/test-thin-crash.sh \
	tests/e2e/test-e2e-thin-xfs.sh \
	tests/e2e/test-e2e-xfs.sh \
	tests/e2e/test-e2e-fstrim-twice.sh \
	tests/e2e/test-liveness-xfs.sh
TESTS += $(PLUGIN_TESTS)
EXTRA_DIST += $(PLUGIN_TESTS)
