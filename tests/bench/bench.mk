# SPDX-License-Identifier: BSD-3-Clause
# The side-by-side benchmarks: tests/bench/run (`make bench`) runs every
# contender and workload and writes docs/benchmarks.md and docs/bench-*.png;
# its smoke mode (tiny sizes) runs in `make check` so the scripts cannot rot.
EXTRA_DIST += tests/bench/run tests/bench/lib.sh tests/bench/journal.sh tests/bench/baseline.sh tests/bench/bench.py tests/bench/ceph \
	tests/bench/test-bench-smoke.sh docs/bench-latency.png docs/bench-discards.png \
	docs/bench-results.jsonl
TESTS += tests/bench/test-bench-smoke.sh
# The smoke run includes the extent-map benchmark, otherwise built only by
# `make bench`.
tests/test-bench-smoke.log: $(bench_programs)
