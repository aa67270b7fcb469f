# SPDX-License-Identifier: BSD-3-Clause
# libFuzzer targets, built with $(FUZZ_CC) (clang) when configure found
# one that can.  A target NAME is the program tests/fuzz/fuzz-NAME, its
# seed corpus is tests/fuzz/corpus-NAME/ and its libFuzzer options, if
# any, are in tests/fuzz/NAME.options (one per line).  make check runs
# each for a few seconds (tests/fuzz/test-fuzzers.sh, FUZZ_SECONDS);
# tests/fuzz/run-fuzzers MINUTES [BUILD_DIR] runs each for longer.
# They are compiled from the sources directly, outside automake's rules,
# because the rest of the build may use another compiler.  They get the
# same warnings (and -Werror) as the rest, as FUZZ_CC takes them, clang's
# lock analysis (-Wthread-safety) included even when CC is gcc: they
# compile the same sources (configure.ac, FUZZ_WARN_CFLAGS).
FUZZ_CFLAGS = -std=gnu11 $(FUZZ_WARN_CFLAGS) -g -O1 \
	-fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -fno-omit-frame-pointer -DHAVE_CONFIG_H \
	-I$(top_builddir) -I$(top_srcdir)/common -I$(top_srcdir)/cache \
	-I$(top_srcdir)/extmap -I$(top_srcdir)/cache/policy \
	-I$(top_srcdir)/cache/protect -I$(top_srcdir)/cache/persist \
	-I$(top_srcdir)/volume -I$(top_srcdir)/volume/thin \
	-I$(top_srcdir)/service \
	-I$(top_srcdir)/tools -I$(top_srcdir)/tests/unit \
	-I$(top_srcdir)/backend
fuzz_ctl_proto_sources = \
	tests/fuzz/fuzz-ctl-proto.c service/ctl-proto.c common/json-flat.c
fuzz_state_sources = \
	tests/fuzz/fuzz-state.c cache/persist/state.c common/crc32c.c common/file-header.c \
	common/log-stderr.c
# Thin mode's meta file loader (checkpoint and journal replay).
fuzz_thin_sources = \
	tests/fuzz/fuzz-thin.c volume/thin/thin-journal.c volume/thin/thin-map.c \
	volume/thin/thin-meta-v1.c volume/thin/thin-recover.c \
	$(extmap_c_sources) common/crc32c.c \
	common/file-header.c \
	common/log-stderr.c
# The format of the journal of the pending set, replayed into a pending
# and a known-clean map as the engine does.
fuzz_journal_sources = \
	tests/fuzz/fuzz-journal.c cache/persist/journal.c cache/policy/clean.c \
	cache/policy/policy.c \
	$(extmap_c_sources) common/crc32c.c common/file-header.c \
	common/log-stderr.c
# The extent map with tiny nodes (deep trees from few extents) and
# allocation failures on demand, against the reference model.
fuzz_extmap_sources = \
	tests/fuzz/fuzz-extmap.c $(extmap_c_sources) tests/unit/extmap-ref.c \
	common/log-stderr.c

EXTRA_DIST += \
	tests/fuzz/fuzz-ctl-proto.c \
	tests/fuzz/fuzz-state.c \
	tests/fuzz/fuzz-extmap.c \
	tests/fuzz/fuzz-thin.c \
	tests/fuzz/fuzz-journal.c \
	tests/fuzz/corpus-ctl-proto \
	tests/fuzz/corpus-state \
	tests/fuzz/corpus-extmap \
	tests/fuzz/corpus-thin \
	tests/fuzz/corpus-journal \
	tests/fuzz/ctl-proto.options \
	tests/fuzz/ctl-proto.ignorelist \
	tests/fuzz/state.options \
	tests/fuzz/extmap.options \
	tests/fuzz/thin.options \
	tests/fuzz/journal.options \
	tests/fuzz/fuzz-lib.sh \
	tests/fuzz/run-fuzzers \
	tests/fuzz/test-fuzzers.sh
# Without --disable-fuzzing the test runs, and skips (fails under CI)
# when no FUZZ_CC was found.
if ENABLE_FUZZING
TESTS += tests/fuzz/test-fuzzers.sh
endif

if HAVE_LIBFUZZER
check_SCRIPTS = tests/fuzz/fuzz-ctl-proto tests/fuzz/fuzz-state \
	tests/fuzz/fuzz-extmap tests/fuzz/fuzz-thin tests/fuzz/fuzz-journal
CLEANFILES += $(check_SCRIPTS)

tests/fuzz/fuzz-ctl-proto: $(fuzz_ctl_proto_sources) \
	  tests/fuzz/ctl-proto.ignorelist config.h
	$(AM_V_CCLD)$(MKDIR_P) tests/fuzz && $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  -fsanitize-coverage-ignorelist=$(srcdir)/tests/fuzz/ctl-proto.ignorelist \
	  -o $@ $(addprefix $(srcdir)/,$(fuzz_ctl_proto_sources))

tests/fuzz/fuzz-state: $(fuzz_state_sources) config.h
	$(AM_V_CCLD)$(MKDIR_P) tests/fuzz && $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  $(ZSTD_CFLAGS) -o $@ $(addprefix $(srcdir)/,$(fuzz_state_sources)) \
	  $(ZSTD_LIBS)

tests/fuzz/fuzz-thin: $(fuzz_thin_sources) config.h
	$(AM_V_CCLD)$(MKDIR_P) tests/fuzz && $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  $(ZSTD_CFLAGS) -o $@ $(addprefix $(srcdir)/,$(fuzz_thin_sources)) \
	  $(ZSTD_LIBS) -lpthread

tests/fuzz/fuzz-journal: $(fuzz_journal_sources) config.h
	$(AM_V_CCLD)$(MKDIR_P) tests/fuzz && $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  -o $@ $(addprefix $(srcdir)/,$(fuzz_journal_sources))

tests/fuzz/fuzz-extmap: $(fuzz_extmap_sources) config.h
	$(AM_V_CCLD)$(MKDIR_P) tests/fuzz && $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  -DEXTMAP_SMALL_NODES -DEXTMAP_FAULT_INJECTION -o $@ \
	  $(addprefix $(srcdir)/,$(fuzz_extmap_sources))
endif
