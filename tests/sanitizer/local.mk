# SPDX-License-Identifier: BSD-3-Clause
# Sanitizer builds only: the exit() shim preloaded into nbdkit with the
# sanitizer runtime (see tests/sanitizer/exit-shim.c).  Plain flags: it
# must not need the runtime it works around.
if HAVE_SANITIZERS
check_LTLIBRARIES += tests/sanitizer/nbdkit-exit-shim.la
endif
tests_sanitizer_nbdkit_exit_shim_la_SOURCES = tests/sanitizer/exit-shim.c
tests_sanitizer_nbdkit_exit_shim_la_CFLAGS = -std=gnu11 $(WARN_CFLAGS)
tests_sanitizer_nbdkit_exit_shim_la_LDFLAGS = \
	-module -avoid-version -shared -rpath /nowhere
