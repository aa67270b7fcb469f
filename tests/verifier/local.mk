# SPDX-License-Identifier: BSD-3-Clause
# The concurrent verifier (tests/verifier/verify.h) and the script that
# runs it against each configuration of the plugin.
check_PROGRAMS += tests/verifier/verify
tests_verifier_verify_SOURCES = \
	tests/verifier/verify.c \
	tests/verifier/verify.h \
	tests/verifier/workload.c \
	tests/verifier/io.c \
	tests/verifier/model.c \
	tests/verifier/model.h \
	tests/verifier/runcmd.c \
	tests/verifier/runcmd.h
tests_verifier_verify_CFLAGS = $(AM_CFLAGS) $(LIBNBD_CFLAGS)
tests_verifier_verify_LDADD = $(LIBNBD_LIBS)

# One script per configuration, so the parallel harness spreads them.
VERIFY_TESTS = \
	tests/e2e/test-verify-eager.sh \
	tests/e2e/test-verify-bound.sh \
	tests/e2e/test-verify-granularity.sh \
	tests/e2e/test-verify-slow-discard.sh \
	tests/e2e/test-verify-passthrough.sh \
	tests/e2e/test-verify-thin.sh \
	tests/e2e/test-verify-clean.sh \
	tests/e2e/test-faults.sh \
	tests/e2e/test-backend-reconnect.sh \
	tests/e2e/test-crash-restart.sh
TESTS += $(VERIFY_TESTS)
EXTRA_DIST += $(VERIFY_TESTS) tests/e2e/verify-lib.sh tests/verifier/soak \
	docs/reliability.md
