# SPDX-License-Identifier: BSD-3-Clause
# Thin mode's end-to-end tests beyond the plugin's list in local.mk.
THIN_TESTS = tests/e2e/test-thin-reserve.sh
TESTS += $(THIN_TESTS)
EXTRA_DIST += $(THIN_TESTS)
