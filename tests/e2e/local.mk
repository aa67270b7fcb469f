# SPDX-License-Identifier: BSD-3-Clause
# The end-to-end scripts (nbdkit, discardfuse, discardctl, real devices
# and file systems), grouped by concern; the unit programs some of them
# drive are built in tests/unit/.  The plugin's own list is in
# tests/local.mk, the verifier's in tests/verifier/local.mk.

# The block device backend on a real loop device and the nbd backend
# against nbdkit (tests/unit/test-backend-blkdev and -nbd).
BACKEND_TESTS = \
	tests/e2e/test-backend-blkdev.sh \
	tests/e2e/test-backend-nbd.sh
TESTS += $(BACKEND_TESTS)
EXTRA_DIST += $(BACKEND_TESTS)

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

# The control socket: the server under nbdkit, and discardctl.
CTL_TESTS = tests/e2e/test-ctl.sh tests/e2e/test-ctl-peercred.sh tests/e2e/test-discardctl.sh
TESTS += $(CTL_TESTS)
EXTRA_DIST += $(CTL_TESTS)

# The service layer as a user meets it: failing before serving; the
# lock on a regular-file backend.  (Its table of keys is checked in
# tests/lint/.)
SERVICE_TESTS = \
	tests/e2e/test-start-checks.sh \
	tests/e2e/test-backend-lock.sh
TESTS += $(SERVICE_TESTS)
EXTRA_DIST += $(SERVICE_TESTS)

# The plugin under nbdkit's own filters (log, blocksize-policy, delay,
# error), as an administrator stacks them.
TESTS += tests/e2e/test-nbdkit-filters.sh
EXTRA_DIST += tests/e2e/test-nbdkit-filters.sh

# The state file across restarts of nbdkit.
TESTS += tests/e2e/test-state.sh tests/e2e/test-stable-identity.sh
EXTRA_DIST += tests/e2e/test-state.sh tests/e2e/test-stable-identity.sh

# Issue 24: the journal of the pending set (invariant 10) through
# crashes, and space pressure (low-water=, invariant 11).
CRASH_TESTS = \
	tests/e2e/test-journal-crash.sh \
	tests/e2e/test-e2e-crash-fstrim.sh \
	tests/e2e/test-low-water.sh \
	tests/e2e/test-journal-shared-flush.sh \
	tests/e2e/test-journal-powercut.sh
TESTS += $(CRASH_TESTS)
EXTRA_DIST += $(CRASH_TESTS) tests/e2e/journal-crash.py

# Adaptive pacing (budget=): the flusher against slow device models
# under load.
TESTS += tests/e2e/test-pacing.sh
EXTRA_DIST += tests/e2e/test-pacing.sh

# Invariant 11: the circuit breaker, forwarding windows, proof of effect.
PROTECT_TESTS = \
	tests/e2e/test-breaker.sh \
	tests/e2e/test-proof.sh \
	tests/e2e/test-window.sh
TESTS += $(PROTECT_TESTS)
EXTRA_DIST += $(PROTECT_TESTS) tests/e2e/protect-lib.sh

# The small-extent policy's bounded stop (issue 23): many tiny extents
# pending.
TESTS += tests/e2e/test-small-stop.sh tests/e2e/test-stop-attached.sh \
	tests/e2e/test-nbd-handshake.sh
EXTRA_DIST += tests/e2e/test-small-stop.sh tests/e2e/test-stop-attached.sh \
	tests/e2e/test-nbd-handshake.sh

# Thin mode's end-to-end tests beyond the plugin's list in tests/local.mk.
THIN_TESTS = tests/e2e/test-thin-reserve.sh
TESTS += $(THIN_TESTS)
EXTRA_DIST += $(THIN_TESTS)

# backend=rbd: without Ceph's libraries, a clear refusal.
if HAVE_RBD
TESTS += tests/e2e/test-rbd-missing.sh
endif
EXTRA_DIST += tests/e2e/test-rbd-missing.sh
