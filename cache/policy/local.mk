# SPDX-License-Identifier: BSD-3-Clause
# The engine's policy: which part of an extent may be sent, the cost
# model and pacing, the small-extent rules and the known-clean map.  Pure (no engine lock): it sees common/, the backend's limits
# and the extent map, nothing above.
POLICY_CPPFLAGS = $(EXTMAP_CPPFLAGS) -I$(top_srcdir)/backend \
	-I$(top_srcdir)/cache/policy
policy_c_sources = cache/policy/clean.c cache/policy/pacing.c \
	cache/policy/policy.c cache/policy/small.c
noinst_LTLIBRARIES += libpolicy.la
libpolicy_la_SOURCES = $(policy_c_sources) \
	cache/policy/clean.h cache/policy/pacing.h cache/policy/policy.h \
	cache/policy/small.h cache/policy/README.md
libpolicy_la_CPPFLAGS = $(POLICY_CPPFLAGS)
