# The extent map benchmark: built and run by `make bench` only (the
# bench target in Makefile.am), never by `make check`.
# (EXTRA_PROGRAMS is set here with "=": automake refuses "+=" on a
# variable not yet set, and Makefile.am does not declare it.)
EXTRA_PROGRAMS = tests/bench/bench-extmap
bench_programs += tests/bench/bench-extmap
tests_bench_bench_extmap_SOURCES = tests/bench/bench-extmap.c
tests_bench_bench_extmap_LDADD = libextmap.la
EXTRA_DIST += tests/bench/run-extmap docs/benchmarks.md
