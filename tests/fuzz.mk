# libFuzzer targets, built with $(FUZZ_CC) (clang) when configure found
# one that can, for the request parser and the state file loader;
# tests/test-fuzz.sh runs each briefly from its committed seed corpus.
# They are compiled from the sources directly, outside automake's rules,
# because the rest of the build may use another compiler.
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -DHAVE_CONFIG_H -I$(top_builddir) \
	-I$(top_srcdir)/common -I$(top_srcdir)/cache -I$(top_srcdir)/tools \
	-I$(top_srcdir)/backend
fuzz_ctl_proto_sources = \
	tests/fuzz/fuzz-ctl-proto.c cache/ctl-proto.c tools/json-flat.c
fuzz_thin_sources = \
	tests/fuzz/fuzz-thin.c cache/thin-journal.c cache/thin-map.c \
	common/crc32c.c common/log-stderr.c
fuzz_state_sources = \
	tests/fuzz/fuzz-state.c cache/state.c common/crc32c.c \
	common/log-stderr.c

EXTRA_DIST += \
	tests/fuzz/fuzz-ctl-proto.c \
	tests/fuzz/fuzz-state.c \
	tests/fuzz/fuzz-thin.c \
	tests/fuzz/corpus-ctl-proto \
	tests/fuzz/corpus-thin \
	tests/fuzz/corpus-state \
	tests/test-fuzz.sh
TESTS += tests/test-fuzz.sh

if HAVE_LIBFUZZER
check_SCRIPTS = tests/fuzz/fuzz-ctl-proto tests/fuzz/fuzz-state tests/fuzz/fuzz-thin
CLEANFILES += $(check_SCRIPTS)

tests/fuzz/fuzz-ctl-proto: $(fuzz_ctl_proto_sources) config.h
	$(AM_V_CCLD)$(MKDIR_P) tests/fuzz && $(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ \
	  $(addprefix $(srcdir)/,$(fuzz_ctl_proto_sources))

tests/fuzz/fuzz-state: $(fuzz_state_sources) config.h
	$(AM_V_CCLD)$(MKDIR_P) tests/fuzz && $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  $(ZSTD_CFLAGS) -o $@ $(addprefix $(srcdir)/,$(fuzz_state_sources)) \
	  $(ZSTD_LIBS)

tests/fuzz/fuzz-thin: $(fuzz_thin_sources) config.h
	$(AM_V_CCLD)$(MKDIR_P) tests/fuzz && $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  $(ZSTD_CFLAGS) -o $@ $(addprefix $(srcdir)/,$(fuzz_thin_sources)) \
	  $(ZSTD_LIBS) -lpthread
endif
