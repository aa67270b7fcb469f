# SPDX-License-Identifier: BSD-3-Clause
# Test programs and scripts.  Each concern keeps its rules in its own
# fragment; all of them run under automake's parallel test harness.
TEST_EXTENSIONS = .sh
EXTRA_DIST += tests/functions.sh

include tests/extmap.mk
include tests/backend.mk
include tests/engine.mk
include tests/fuse.mk
include tests/ctl.mk
include tests/packaging.mk
include tests/service.mk
include tests/state.mk
include tests/crash.mk
include tests/pacing.mk
include tests/stats.mk
include tests/protect.mk
include tests/small.mk
include tests/thin.mk
include tests/ceph.mk
include tests/rbd-lib.mk
include tests/fuzz.mk
include tests/lint/local.mk
include tests/verifier/local.mk
include tests/filters/local.mk
include tests/sanitizer/local.mk

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
