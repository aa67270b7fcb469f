# SPDX-License-Identifier: BSD-3-Clause
# What an installation is made of and what an administrator sees:
# make install, the systemd units, the bash completion,
# the Debian packages, discardctl's Prometheus text, messages and
# progress bar.
PACKAGING_TESTS = \
	tests/e2e/test-discardctl-admin.sh \
	tests/packaging/test-install.sh \
	tests/packaging/test-completion.sh \
	tests/packaging/test-systemd-units.sh \
	tests/packaging/test-deb.sh
TESTS += $(PACKAGING_TESTS)
EXTRA_DIST += $(PACKAGING_TESTS)
EXTRA_DIST += tests/packaging/install-lib.sh

# Ceph's libraries are not linked into the plugin nor discardfuse
# (backend/rbd/rbd-lib.c loads them for backend=rbd: only).
TESTS += tests/packaging/test-rbd-not-linked.sh
EXTRA_DIST += tests/packaging/test-rbd-not-linked.sh
