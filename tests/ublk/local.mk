# SPDX-License-Identifier: BSD-3-Clause
# discardublk on the host: a kernel without ublk gets one clear message.
# The device itself is tested in a guest (tests/guest/test-guest-ublk.sh).
UBLK_TESTS = tests/ublk/test-ublk-no-kernel.sh
TESTS += $(UBLK_TESTS)
EXTRA_DIST += $(UBLK_TESTS)
