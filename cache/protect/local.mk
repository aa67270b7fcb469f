# SPDX-License-Identifier: BSD-3-Clause
# Invariant 11's pure parts: the circuit breaker, the forwarding
# windows and proof of effect's sample queue.  No engine lock: the
# engine's side of each is cache/engine/engine-protect.c and engine-proof.c.
PROTECT_CPPFLAGS = $(POLICY_CPPFLAGS) -I$(top_srcdir)/cache/protect
noinst_LTLIBRARIES += libprotect.la
libprotect_la_SOURCES = cache/protect/breaker.c cache/protect/breaker.h \
	cache/protect/proof.c cache/protect/proof.h \
	cache/protect/window.c cache/protect/window.h cache/protect/README.md
libprotect_la_CPPFLAGS = $(PROTECT_CPPFLAGS)
