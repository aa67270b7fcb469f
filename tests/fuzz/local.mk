# libFuzzer targets, built when configure finds that $CC can link with
# -fsanitize=fuzzer (CC=clang).  A target NAME is the program
# tests/fuzz/fuzz-NAME, with its seed corpus in tests/fuzz/corpus-NAME/
# and libFuzzer options, if any, in tests/fuzz/NAME.options (one per
# line).  make check runs every target that has a corpus for a few
# seconds (tests/fuzz/test-fuzzers.sh, FUZZ_SECONDS); the script
# tests/fuzz/run-fuzzers MINUTES [BUILD_DIR] runs each for longer.
#
# To add a target: a fuzz-NAME.c defining LLVMFuzzerTestOneInput, its
# three lines below (_SOURCES, _CFLAGS = $(fuzz_cflags), _LDFLAGS =
# $(FUZZ_CFLAGS)), its name in fuzz_programs, and a committed corpus.
EXTRA_DIST += tests/fuzz/test-fuzzers.sh tests/fuzz/run-fuzzers tests/fuzz/fuzz-lib.sh \
	tests/fuzz/corpus-extmap tests/fuzz/extmap.options
fuzz_cflags = -std=gnu11 $(WARN_CFLAGS) $(FUZZ_CFLAGS)
fuzz_programs = tests/fuzz/fuzz-extmap

if HAVE_LIBFUZZER
check_PROGRAMS += $(fuzz_programs)
TESTS += tests/fuzz/test-fuzzers.sh
endif

# The extent map with tiny nodes (deep trees from few extents) and
# allocation failures on demand, against the reference model.
tests_fuzz_fuzz_extmap_SOURCES = tests/fuzz/fuzz-extmap.c cache/extmap.c \
	$(extmap_ref_sources)
tests_fuzz_fuzz_extmap_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit \
	-DEXTMAP_SMALL_NODES -DEXTMAP_FAULT_INJECTION
tests_fuzz_fuzz_extmap_CFLAGS = $(fuzz_cflags)
tests_fuzz_fuzz_extmap_LDFLAGS = $(FUZZ_CFLAGS)
