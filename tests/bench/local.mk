# SPDX-License-Identifier: BSD-3-Clause
# The extent map benchmark: built and run by `make bench` only (the
# bench target in Makefile.am), never by `make check`.  It is an
# EXTRA_PROGRAMS entry so that automake writes its link rule, set with
# "=" because automake refuses "+=" on a variable not set before; and
# automake does not clean EXTRA_PROGRAMS, hence CLEANFILES.
EXTRA_PROGRAMS = tests/bench/bench-extmap
bench_programs += tests/bench/bench-extmap$(EXEEXT)
CLEANFILES += tests/bench/bench-extmap$(EXEEXT)
tests_bench_bench_extmap_SOURCES = tests/bench/bench-extmap.c
tests_bench_bench_extmap_LDADD = libextmap.la libdclogstderr.la
EXTRA_DIST += tests/bench/run-extmap docs/benchmarks.md

# The pacing benchmark (budget= against fixed pacing under sustained
# load): its own script and report, docs/benchmarks-pacing.md.
.PHONY: bench-pacing
bench: bench-pacing
bench-pacing: all tests/filters/nbdkit-trimcost-filter.la
	$(top_srcdir)/tests/bench/pacing '$(abs_top_builddir)'
EXTRA_DIST += tests/bench/pacing tests/bench/pacing-report.py \
	docs/benchmarks-pacing.md docs/bench-pacing-backlog.png

# The small-extent policy and the bounded stop (issue 23): ext4 on the
# 5 ms device and the mixed load, today's keys against the new ones;
# its own section of docs/benchmarks.md.
.PHONY: bench-smallext
bench: bench-smallext
bench-smallext: all
	$(top_srcdir)/tests/bench/smallext '$(abs_top_builddir)'
EXTRA_DIST += tests/bench/smallext tests/bench/smallext-report.py \
	docs/bench-smallext.jsonl

# Thin mode's microbenchmark (map memory, checkpoint load, allocator
# cost with many pending runs): the thin workload of tests/bench/run.
EXTRA_PROGRAMS += tests/bench/bench-thin
bench_programs += tests/bench/bench-thin$(EXEEXT)
CLEANFILES += tests/bench/bench-thin$(EXEEXT)
tests_bench_bench_thin_SOURCES = tests/bench/bench-thin.c
tests_bench_bench_thin_LDADD = libvolume.la libdclogstderr.la

# The cost of proof of effect to the clients: `make bench` runs it and
# writes its section of docs/benchmarks.md.
.PHONY: bench-proof
bench: bench-proof
bench-proof: all
	$(top_srcdir)/tests/bench/proof '$(abs_top_builddir)'
EXTRA_DIST += tests/bench/proof
