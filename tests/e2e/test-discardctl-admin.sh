#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardctl as an administrator sees it:
# - the Prometheus text of a running server (thin mode and budget=, so
#   that every metric is there) is clean under promtool check metrics,
#   in base units;
# - the table's headline sets trims in beside discards out;
# - usage errors are one line each;
# - -s naming a regular file or a directory says so;
# - with several servers, the list names each one's backend (a stable
#   NAME.sock counts as well as PID.sock);
# - flush --progress fits the terminal at 40, 80 and 200 columns (from
#   $COLUMNS, and from the terminal's own size) and redraws in place.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --filter=delay null --dump-plugin
requires promtool --version

mktempdir
dir=$TESTDIR

expect ()
{
    local want=$1 rc
    shift
    timeout 120 "$DISCARDCTL" "$@" >"$dir/out" 2>"$dir/err"
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        cat "$dir/out" "$dir/err"
        fail "discardctl $*: exit $rc, expected $want"
    fi
}

# Prometheus: thin=on and budget= make the server send every metric.
truncate -s 64M "$dir/disk"
start_nbdkit -P "$dir/pid" -U "$dir/nbd.sock" "$PLUGIN" backend="$dir/disk" \
    thin=on meta="$dir/meta" budget=2ms delay=1h ctl="$dir/ctl.sock"
wait_for_ctl "$dir/ctl.sock"
/usr/bin/python3 - "$dir/nbd.sock" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
h.pwrite(b"\xaa" * (1 << 20), 0)
h.trim(1 << 20, 0)
h.flush()
h.shutdown()
PY
expect 0 -s "$dir/ctl.sock" stats --format=prometheus
promtool check metrics <"$dir/out" >"$dir/promtool" 2>&1 ||
    { cat "$dir/promtool"; fail "promtool check metrics failed"; }
[ ! -s "$dir/promtool" ] || { cat "$dir/promtool"; fail "promtool complains"; }
! grep -E '^discardcache_[a-z0-9_]*(micro|milli|_us|_ms|gib)' "$dir/out" ||
    fail "a metric not in base units"
grep -qx 'discardcache_budget_seconds 0.002' "$dir/out" || { cat "$dir/out"; fail "budget in seconds"; }
grep -q '^discardcache_thin_slots_free{state="clean"} ' "$dir/out" || fail "no thin metrics"
grep -q '^discardcache_model_seconds_per_byte ' "$dir/out" || fail "no cost model metrics"
echo "prometheus: $(grep -c '^# TYPE' "$dir/out") metrics, promtool clean"

# The headline.
expect 0 -s "$dir/ctl.sock" stats
head -n 1 "$dir/out" | grep -qE '^discardcache: [0-9]+ trims in, [0-9]+ discards out \([0-9.]+ [KMG]?i?B in, [0-9.]+ [KMG]?i?B out\)$' ||
    { cat "$dir/out"; fail "no headline 'N trims in, M discards out (X in, Y out)'"; }
! grep -q "of trims received" "$dir/out" || fail "the percentage of counts is back"

# Usage errors: one line each on stderr, nothing on stdout, exit 2.
one_line_error ()
{
    local want=$1
    shift
    expect 2 "$@"
    [ "$(wc -l <"$dir/err")" -eq 1 ] && [ ! -s "$dir/out" ] ||
        { cat "$dir/err"; fail "discardctl $*: not one error line"; }
    grep -qF -- "$want" "$dir/err" || { cat "$dir/err"; fail "discardctl $*: no '$want'"; }
}
one_line_error "--watch=abc: invalid value: expected a duration: a number, a fraction allowed" \
    -s "$dir/ctl.sock" stats --watch=abc
one_line_error "--watch=0: invalid value: expected a duration above 0: a number, a fraction allowed" \
    -s "$dir/ctl.sock" stats --watch=0
one_line_error "--watch=-1s: invalid value" -s "$dir/ctl.sock" stats --watch=-1s
one_line_error "unknown option '--bogus'" -s "$dir/ctl.sock" dump --bogus
one_line_error "unknown option '--bogus'" --bogus stats
one_line_error "--wait is not an option of dump" -s "$dir/ctl.sock" dump --wait
one_line_error "'--format' needs a value" -s "$dir/ctl.sock" stats --format
one_line_error "unknown command 'frobnicate'" -s "$dir/ctl.sock" frobnicate

# -s naming something that is not a socket.
echo '{}' >"$dir/regular"
expect 3 -s "$dir/regular" stats
grep -q "a regular file, not a socket" "$dir/err" || { cat "$dir/err"; fail "-s FILE"; }
! grep -qi "killed\|nothing is listening" "$dir/err" || fail "-s FILE suggests a killed server"
expect 3 -s "$dir" stats
grep -q "$dir: cannot connect: a directory, not a socket" "$dir/err" || { cat "$dir/err"; fail "-s DIR"; }

# Several servers in the default directory: each with its backend.
xdg=$dir/xdg
mkdir -p "$xdg/discardcache"
chmod 0700 "$xdg/discardcache"
truncate -s 16M "$dir/disk-a" "$dir/disk-b"
XDG_RUNTIME_DIR=$xdg start_nbdkit -P "$dir/a.pid" -U "$dir/a.sock" "$PLUGIN" \
    backend="$dir/disk-a"
a=$(cat "$dir/a.pid")
wait_for_ctl "$xdg/discardcache/$a.sock"
start_nbdkit -P "$dir/b.pid" -U "$dir/b.sock" "$PLUGIN" backend="$dir/disk-b" \
    ctl="$xdg/discardcache/named.sock"
wait_for_ctl "$xdg/discardcache/named.sock"
XDG_RUNTIME_DIR=$xdg expect 2 stats
grep -q "2 discardcache servers are running" "$dir/err" || { cat "$dir/err"; fail "no list"; }
grep -qF "$xdg/discardcache/$a.sock  (backend=$dir/disk-a, pid $a)" "$dir/err" ||
    { cat "$dir/err"; fail "the list does not name server a's backend"; }
grep -qF "$xdg/discardcache/named.sock  (backend=$dir/disk-b, pid $(cat "$dir/b.pid"))" "$dir/err" ||
    { cat "$dir/err"; fail "the list does not name the named server's backend"; }
# The named one alone is found without -s.
stop_pidfile "$dir/a.pid" nbdkit
XDG_RUNTIME_DIR=$xdg expect 0 stats --json
grep -q '"trims":0' "$dir/out" || fail "the one named socket was not used"
stop_pidfile "$dir/b.pid" nbdkit
echo "messages: one line each; -s FILE and -s DIR; the list names backends"

# flush --progress on a terminal of 40, 80 and 200 columns.
script -qc true /dev/null >/dev/null 2>&1 || skip "script(1) cannot run a pseudo-terminal here"
start_nbdkit -P "$dir/dev.pid" -U "$dir/dev.sock" --filter=delay memory 64M \
    delay-trim=200ms
start_nbdkit -P "$dir/slow.pid" -U "$dir/slow.sock" "$PLUGIN" \
    backend="nbd+unix:///?socket=$dir/dev.sock" delay=1h ctl="$dir/slow-ctl.sock"
wait_for_ctl "$dir/slow-ctl.sock"

# progress_at COLUMNS HOW: trims, then flush --progress on a terminal
# whose width HOW (env: $COLUMNS; stty: the terminal's size) sets.  Each
# call trims space of its own: space discarded once is known clean, and
# a second TRIM of it would not be sent (nothing to show progress of).
round=0
progress_at ()
{
    local cols=$1 how=$2 cmd
    round=$((round + 1))
    /usr/bin/python3 -c '
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
base = int(sys.argv[2]) << 23
for i in range(8): h.trim(65536, base + (i << 20))
h.shutdown()' "$dir/slow.sock" "$round"
    cmd="'$DISCARDCTL' -s '$dir/slow-ctl.sock' flush --progress"
    if [ "$how" = env ]; then
        COLUMNS=$cols script -qec "$cmd" /dev/null >"$dir/tty" 2>&1
    else
        env -u COLUMNS script -qec "stty cols $cols; $cmd" /dev/null >"$dir/tty" 2>&1
    fi || { cat -A "$dir/tty"; fail "flush --progress at $cols columns ($how) failed"; }
    /usr/bin/python3 - "$dir/tty" "$cols" "$how" <<'PY' || fail "progress at $cols columns ($how)"
import re, sys
text = open(sys.argv[1], "rb").read().decode()
cols = int(sys.argv[2])
# What each redraw leaves on the line: the text between two \r or \n,
# without the erase-line sequence.
draws = [re.sub(r"\x1b\[K", "", s) for s in re.split(r"[\r\n]", text)]
bars = [d for d in draws if d.startswith("flush [")]
assert len(bars) >= 2, "fewer than two redraws: %r" % text
for d in bars:
    assert len(d) < cols, "%d columns, wider than %d: %r" % (len(d), cols - 1, d)
assert text.count("\r") >= len(bars), "not redrawn in place with \\r"
assert any(d.startswith("flush: done") for d in draws), "no summary"
widest = max(len(d) for d in bars)
if cols <= 100:     # wider, the bar stops growing at 60
    assert widest == cols - 1, "the bar does not use the width: %d of %d" % (widest, cols)
print("progress at %d columns (%s): %d redraws, the widest %d" % (cols, sys.argv[3], len(bars), widest))
PY
}
progress_at 40 env
progress_at 80 env
progress_at 200 env
progress_at 80 stty
progress_at 40 stty
echo "discardctl admin: ok"
