# SPDX-License-Identifier: BSD-3-Clause
# Checks of the source tree itself, no server started: every file's
# SPDX tag; the layers (the engine calls no thin_* function, the volume
# uses engine.h only, nothing includes upward); the call graph between
# files, from the objects (no call up a layer, at most three cycles,
# none through cache/engine/engine.c or across folders); the one table of keys
# (tests/lint/keys-table prints it) against --help, the man pages and
# the README.
check_PROGRAMS += tests/lint/keys-table
tests_lint_keys_table_SOURCES = tests/lint/keys-table.c
tests_lint_keys_table_LDADD = libservice.la libdclogstderr.la

LINT_TESTS = \
	tests/lint/test-spdx.sh \
	tests/lint/test-layers.sh \
	tests/lint/test-cycles.sh \
	tests/lint/test-keys.sh
TESTS += $(LINT_TESTS)
EXTRA_DIST += $(LINT_TESTS) tests/lint/callgraph.py

.PHONY: check-lint
check-lint:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(LINT_TESTS)'
