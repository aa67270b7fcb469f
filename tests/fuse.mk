# SPDX-License-Identifier: BSD-3-Clause
# Tests of discardfuse, the FUSE front-end: real mounts, loop devices and
# file systems; each skips (exit 77, a failure under CI=true) without
# root, /dev/fuse or loop devices.
FUSE_TESTS = \
	tests/e2e/test-fuse-params.sh \
	tests/e2e/test-fuse-ops.sh \
	tests/e2e/test-fuse-e2e-xfs.sh \
	tests/e2e/test-fuse-e2e-fstrim-twice.sh \
	tests/e2e/test-fuse-fio-verify.sh \
	tests/e2e/test-fuse-unmount-io.sh \
	tests/e2e/test-fuse-thin.sh
TESTS += $(FUSE_TESTS)
EXTRA_DIST += $(FUSE_TESTS)

.PHONY: check-fuse
check-fuse:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(FUSE_TESTS)'
