# SPDX-License-Identifier: BSD-3-Clause
# What an installation is made of and what an administrator sees: the
# licence tags, make install, the systemd units, the bash completion,
# the Debian packages, discardctl's Prometheus text, messages and
# progress bar.
PACKAGING_TESTS = \
	tests/test-spdx.sh \
	tests/test-discardctl-admin.sh \
	tests/test-install.sh \
	tests/test-completion.sh \
	tests/test-systemd-units.sh \
	tests/test-deb.sh
TESTS += $(PACKAGING_TESTS)
EXTRA_DIST += $(PACKAGING_TESTS)
EXTRA_DIST += tests/install-lib.sh
