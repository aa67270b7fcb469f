#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The benchmarks in smoke mode (tiny sizes, one run of each contender), so
# the scripts cannot rot: tests/bench/run --smoke must write a report with
# every section and both plots.  The figures themselves are not checked.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires fio --version
requires /usr/bin/python3 --version

mktempdir
out=$TESTDIR/docs
# This build's own plugin stands in for the baseline build: its rows and
# ratios are rendered without building an older commit.
"$abs_top_srcdir/tests/bench/run" --smoke --out "$out" --baseline-plugin "$PLUGIN" \
    "$abs_top_builddir" >"$TESTDIR/run.log" 2>&1
status=$?
cat "$TESTDIR/run.log"
[ "$status" -eq 0 ] || fail "tests/bench/run --smoke failed"
grep -q '^bench: total wall time [0-9]* min [0-9]* s' "$TESTDIR/run.log" ||
    fail "tests/bench/run did not print its total wall time"
md=$out/benchmarks.md
[ -s "$md" ] || fail "no $md"
sections=("## Targets" "## 1. Mixed" "## 3. Data-path" "## 4. Memory" "## 5. Extent map")
# Thin mode has a row whether it ran or not (then it says why not).
rows=(discardcache "discardcache thin=on")
grep -qF "the baseline build" "$md" || fail "$md has no baseline build rows"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ] && losetup -f >/dev/null 2>&1 &&
   command -v nbdfuse >/dev/null && command -v fstrim >/dev/null &&
   command -v mkfs.xfs >/dev/null && [ -x "$DISCARDFUSE" ]; then
    sections+=("## 2. XFS")
    rows+=(discardfuse)
fi
for s in "${sections[@]}"; do
    grep -qF "$s" "$md" || fail "$md has no section \"$s\""
done
for r in "${rows[@]}"; do
    grep -qF "| $r |" "$md" || fail "$md has no \"$r\" row"
done
if command -v gnuplot >/dev/null; then
    for png in bench-latency.png bench-discards.png; do
        [ -s "$out/$png" ] || fail "no plot $out/$png"
        grep -qF "($png)" "$md" || fail "$md does not show $png"
    done
else
    echo "$0: gnuplot missing (scripts/install-deps installs gnuplot-nox): plots not checked"
fi
echo "bench smoke: ok"
