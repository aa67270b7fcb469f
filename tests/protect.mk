# SPDX-License-Identifier: BSD-3-Clause
# Invariant 11: the circuit breaker, forwarding windows, proof of effect.
PROTECT_TESTS = \
	tests/e2e/test-breaker.sh \
	tests/e2e/test-proof.sh
TESTS += $(PROTECT_TESTS)
EXTRA_DIST += $(PROTECT_TESTS) tests/e2e/protect-lib.sh
