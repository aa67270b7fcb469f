# SPDX-License-Identifier: BSD-3-Clause
# Invariant 11: the circuit breaker, forwarding windows, proof of effect.
PROTECT_TESTS = \
	tests/e2e/test-breaker.sh \
	tests/e2e/test-proof.sh \
	tests/e2e/test-window.sh
TESTS += $(PROTECT_TESTS)
EXTRA_DIST += $(PROTECT_TESTS) tests/e2e/protect-lib.sh

# The breaker's state machine, the windows, and both in the engine.
check_PROGRAMS += tests/unit/test-protect
TESTS += tests/unit/test-protect
tests_unit_test_protect_SOURCES = tests/unit/test-protect.c \
	$(engine_test_sources)
tests_unit_test_protect_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit
tests_unit_test_protect_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_protect_LDADD = tests/libmembackend.la $(CMOCKA_LIBS)

# The cost of proof of effect to the clients: `make bench` runs it and
# writes its section of docs/benchmarks.md.
.PHONY: bench-proof
bench: bench-proof
bench-proof: all
	$(top_srcdir)/tests/bench/proof '$(abs_top_builddir)'
EXTRA_DIST += tests/bench/proof
