#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardctl against the plugin under nbdkit: each command and output
# format (the table's ratios, JSON that parses, Prometheus text that
# follows the format, dump lines, the progress bar on a terminal and
# plain lines without one), the exit codes 0/1/2/3, how it finds the
# socket (-s, DISCARDCACHE_CTL, the one live PID.sock in the default
# directory, or a list of candidates when there are several), and stats
# --file on what statsfile= left.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'
requires "$NBDKIT" --filter=delay null --dump-plugin

mktempdir
dir=$TESTDIR
ctl=$dir/ctl.sock
truncate -s 64M "$dir/disk"
start_nbdkit -P "$dir/pid" -U "$dir/nbd.sock" "$PLUGIN" backend="$dir/disk" \
    delay=1h ctl="$ctl"
wait_for_ctl "$ctl"

# expect CODE CMD...: run discardctl (at most 2 minutes), keep its
# output in $dir/out.
expect ()
{
    local want=$1 rc
    shift
    timeout 120 "$DISCARDCTL" "$@" >"$dir/out" 2>&1
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        cat "$dir/out"
        fail "discardctl $*: exit $rc, expected $want"
    fi
}

# out_has TEXT: the last output contains TEXT.
out_has ()
{
    grep -qF -- "$1" "$dir/out" || { cat "$dir/out"; fail "output lacks '$1'"; }
}

/usr/bin/python3 - "$dir/nbd.sock" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
h.pwrite(b"\xaa" * (1 << 20), 0)
h.trim(65536, 0)
h.pwrite(b"\xbb" * 16384, 0)            # cancels a quarter of it
h.trim(8192, 1 << 20)
h.trim(100, 3 << 20)                    # a sub-granule fragment
h.shutdown()
PY

# stats: the table, JSON, Prometheus.
expect 0 -s "$ctl" stats
out_has "discardcache: 3 trims in, 0 discards out (72.1 KiB in, 0 B out)"
out_has "cancelled by writes:   22% of trimmed bytes (16.0 KiB)"
out_has "pending:               3 extents, 56.1 KiB (sub-granule 100 B)"
expect 0 -s "$ctl" stats --json
/usr/bin/python3 -m json.tool "$dir/out" >/dev/null || fail "stats --json is not JSON"
[ "$(jq 'has("ok")' "$dir/out")" = false ] || fail "stats --json carries the protocol envelope"
[ "$(jq .trims "$dir/out")" = 3 ] || fail "stats --json: trims"
[ "$(jq .cancelled_by_writes "$dir/out")" = 16384 ] || fail "stats --json: cancelled_by_writes"
expect 0 -s "$ctl" stats --format=prometheus
/usr/bin/python3 - "$dir/out" <<'PY' || fail "not valid Prometheus text"
import re, sys
helped, typed, seen = set(), {}, set()
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    m = re.match(r"# (HELP|TYPE) (discardcache_[a-z0-9_]+) (.+)$", line)
    if m:
        (helped.add if m[1] == "HELP" else lambda n: typed.__setitem__(n, m[3]))(m[2])
        continue
    m = re.match(r'(discardcache_[a-z0-9_]+)(\{[a-z]+="[a-z0-9]+"\})? '
                 r'([0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?)$', line)
    assert m, "bad line: %r" % line
    name = m[1]
    assert name in helped and name in typed, "no HELP/TYPE before " + name
    assert typed[name] in ("counter", "gauge")
    assert not name.endswith("_total") or typed[name] == "counter", name
    seen.add(name)
for want in ["discardcache_trims_total", "discardcache_pending_bytes",
             "discardcache_dropped_bytes_total", "discardcache_discard_supported"]:
    assert want in seen, want + " missing"
print("prometheus: %d metrics" % len(seen))
PY
grep -q '^discardcache_cancelled_by_writes_bytes_total 16384$' "$dir/out" ||
    fail "prometheus: cancelled_by_writes"
expect 0 -s "$ctl" stats --watch=100ms --count=3
[ "$(grep -c '^discardcache: 3 trims in' "$dir/out")" -eq 3 ] || fail "--watch --count=3"
expect 0 -s "$ctl" stats --watch=0.1 --count=2
[ "$(grep -c '^every 100 ms, ' "$dir/out")" -eq 2 ] || { cat "$dir/out"; fail "--watch=0.1"; }
expect 0 -s "$ctl" stats --json --watch=50ms --count=2
[ "$(jq -s length "$dir/out")" -eq 2 ] || fail "--json --watch: two objects"

# dump: text and JSON lines, in address order.
expect 0 -s "$ctl" dump
[ "$(cut -d' ' -f1,2 "$dir/out")" = "16384 49152
1048576 8192
3145728 100" ] || { cat "$dir/out"; fail "dump lines"; }
expect 0 -s "$ctl" dump --json
[ "$(jq -s 'map(.length) | add' "$dir/out")" = 57444 ] || fail "dump --json"

# pause, set, resume.  The sets run paused: the extents are older than
# delay=1.5s by now, and a flusher running before delay=2h (under load
# it did, in CI) would forward what the flush below must count.
expect 0 -s "$ctl" pause
[ "$("$DISCARDCTL" -s "$ctl" stats --json | jq .paused)" = true ] || fail "not paused"
expect 0 -s "$ctl" set delay=1.5s budget=0.5ms
[ "$(cat "$dir/out")" = "$(printf 'delay=1.5s\nbudget=0.5ms')" ] ||
    { cat "$dir/out"; fail "set with fractions"; }
[ "$("$DISCARDCTL" -s "$ctl" stats --json | jq .budget_us)" = 1000 ] ||
    fail "budget=0.5ms not set as 1 ms (whole ms, rounded up)"
expect 0 -s "$ctl" set delay=2h
out_has "delay=2h"
expect 1 -s "$ctl" set delay=soon
out_has "set delay=soon: invalid value: expected a duration"
expect 1 -s "$ctl" set granularity=4k
out_has "cannot be changed while running"
# Several at once: each printed; one bad pair and nothing changes.
expect 0 -s "$ctl" set delay=2h idle=1s budget=5ms
[ "$(cat "$dir/out")" = "$(printf 'delay=2h\nidle=1s\nbudget=5ms')" ] ||
    { cat "$dir/out"; fail "set with three pairs"; }
[ "$("$DISCARDCTL" -s "$ctl" stats --json | jq .budget_us)" = 5000 ] || fail "budget=5ms not set"
expect 1 -s "$ctl" set budget=9ms foo=bar
out_has "set foo: unknown key"
expect 1 -s "$ctl" set budget=9ms delay=soon
out_has "set delay=soon: invalid value"
[ "$("$DISCARDCTL" -s "$ctl" stats --json | jq .budget_us)" = 5000 ] ||
    fail "a refused set changed budget"
expect 0 -s "$ctl" set budget=off
[ "$("$DISCARDCTL" -s "$ctl" stats --json | jq .budget_us)" = 0 ] || fail "budget=off not set"
# Resumed with delay=2h: nothing comes of age before the flush.
expect 0 -s "$ctl" resume
[ "$("$DISCARDCTL" -s "$ctl" stats --json | jq .paused)" = false ] || fail "not resumed"
[ "$("$DISCARDCTL" -s "$ctl" stats --json | jq .forwarded)" = 0 ] ||
    fail "discards forwarded before the flush"

# flush: without a terminal, the summary; then nothing but the fragment.
expect 0 -s "$ctl" flush --wait
out_has "flush: done: 2 discards, 56.0 KiB"
[ "$("$DISCARDCTL" -s "$ctl" stats --json | jq '.pending_bytes == .subgranule_bytes')" = true ] ||
    fail "more than fragments pending after flush --wait"
expect 0 -s "$ctl" flush
out_has "flush: started"

# Usage errors: exit 2, before any connection.
expect 2
expect 2 -s "$ctl" frobnicate
out_has "unknown command 'frobnicate'"
expect 2 -s "$ctl" stats --bogus
expect 2 -s "$ctl" stats --format=xml
out_has "expected table, json or prometheus"
expect 2 -s "$ctl" stats --watch=0
expect 2 -s "$ctl" dump --wait
expect 2 -s "$ctl" pause now
expect 2 -s "$ctl" set
expect 2 -s "$ctl" set delay
expect 2 -s "$ctl" set 'delay=1 s'
expect 2 -s "$ctl" set delay=1s idle
out_has "set idle: expected KEY=VALUE"
expect 0 --help
out_has "Usage: discardctl"
expect 0 --version
out_has "discardctl (discardcache)"

# Cannot connect: exit 3, saying why.
expect 3 -s "$dir/missing.sock" stats
out_has "no such socket"
/usr/bin/python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$dir/stale.sock"
expect 3 -s "$dir/stale.sock" stats
out_has "nothing is listening"

# The progress bar on a terminal, plain lines otherwise, over slow trims.
start_nbdkit -P "$dir/dev.pid" -U "$dir/dev.sock" --filter=delay memory 64M \
    delay-trim=250ms
start_nbdkit -P "$dir/slow.pid" -U "$dir/slow.sock" "$PLUGIN" \
    backend="nbd+unix:///?socket=$dir/dev.sock" delay=1h ctl="$dir/slow-ctl.sock"
wait_for_ctl "$dir/slow-ctl.sock"
slow_trims ()
{
    /usr/bin/python3 -c '
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
for i in range(10): h.trim(65536, i << 20)
h.shutdown()' "$dir/slow.sock"
}
slow_trims
expect 0 -s "$dir/slow-ctl.sock" flush --progress
grep -qE '^flush: [0-9]+%: .* of 640\.0 KiB, .*/s, ETA ' "$dir/out" || { cat "$dir/out"; fail "no progress lines"; }
out_has "flush: done: 10 discards, 640.0 KiB"
# The same trims again: known clean, nothing to send (invariant 9);
# after forget-clean they go to the device again.
slow_trims
expect 0 -s "$dir/slow-ctl.sock" flush --wait
out_has "flush: done: 0 discards"
expect 0 -s "$dir/slow-ctl.sock" stats --json
[ "$(jq .already_clean_bytes "$dir/out")" = 655360 ] || fail "the repeated trims were not counted as already clean"
expect 0 -s "$dir/slow-ctl.sock" forget-clean
out_has "forgot 10 known-clean extents (640.0 KiB)"
expect 0 -s "$dir/slow-ctl.sock" forget-clean --json
[ "$(jq .forgot_extents "$dir/out")" = 0 ] || fail "forget-clean --json: not the server's reply"
expect 2 -s "$dir/slow-ctl.sock" forget-clean now
expect 2 -s "$dir/slow-ctl.sock" forget-clean --wait
if script -qc true /dev/null >/dev/null 2>&1; then
    slow_trims
    script -qec "'$DISCARDCTL' -s '$dir/slow-ctl.sock' flush --wait --progress" /dev/null \
        >"$dir/out" 2>&1 || { cat "$dir/out"; fail "flush on a terminal failed"; }
    # Redrawn in place: a carriage return, then the bar.
    grep -qaE $'\r\e\\[Kflush \\[#+\\.*\\] +[0-9]+% .* of 640\\.0 KiB' "$dir/out" ||
        { cat -A "$dir/out"; fail "no progress bar on a terminal"; }
    out_has "flush: done: 10 discards"
fi

# Finding the socket: the one live PID.sock in $XDG_RUNTIME_DIR/discardcache.
# Each server has a disk of its own: a served file is locked.
xdg=$dir/xdg
mkdir "$xdg"
truncate -s 64M "$dir/disk.a" "$dir/disk.n" "$dir/disk.b" "$dir/disk.f"
XDG_RUNTIME_DIR=$xdg start_nbdkit -v -P "$dir/a.pid" -U "$dir/a.sock" "$PLUGIN" \
    backend="$dir/disk.a" 2>"$dir/a.log"
a=$(cat "$dir/a.pid")
wait_for_ctl "$xdg/discardcache/$a.sock"
[ "$(stat -c %a "$xdg/discardcache")" = 700 ] || fail "default directory is not 0700"
grep -q "ctl: control socket $xdg/discardcache/$a.sock" "$dir/a.log" ||
    fail "nbdkit -v does not show the socket's path"
# A socket left by a dead server is not a candidate.
/usr/bin/python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
    "$xdg/discardcache/2147483646.sock"
XDG_RUNTIME_DIR=$xdg expect 0 stats --json
[ "$(jq .trims "$dir/out")" = 0 ] || fail "the default socket reached another server"
# ctl=none: no socket (checked once the engine has started).
XDG_RUNTIME_DIR=$xdg start_nbdkit -v -P "$dir/n.pid" -U "$dir/n.sock" "$PLUGIN" \
    backend="$dir/disk.n" readonly=true ctl=none 2>"$dir/n.log"
for (( i = 0; i < 300; i++ )); do
    grep -q "ctl=none: no control socket" "$dir/n.log" && break
    sleep 0.1
done
grep -q "ctl=none: no control socket" "$dir/n.log" || fail "the ctl=none server did not start"
[ "$(ls "$xdg/discardcache" | wc -l)" -eq 2 ] || fail "ctl=none created a socket"
# Two servers: a list, exit 2; DISCARDCACHE_CTL picks one.
XDG_RUNTIME_DIR=$xdg start_nbdkit -P "$dir/b.pid" -U "$dir/b.sock" "$PLUGIN" \
    backend="$dir/disk.b" readonly=true
b=$(cat "$dir/b.pid")
wait_for_ctl "$xdg/discardcache/$b.sock"
XDG_RUNTIME_DIR=$xdg expect 2 stats
out_has "2 discardcache servers are running"
out_has "$xdg/discardcache/$a.sock"
out_has "$xdg/discardcache/$b.sock"
XDG_RUNTIME_DIR=$xdg DISCARDCACHE_CTL=$ctl expect 0 stats --json
[ "$(jq .trims "$dir/out")" = 3 ] || fail "DISCARDCACHE_CTL not used"
XDG_RUNTIME_DIR=$dir/nowhere expect 3 stats
out_has "no control socket found in $dir/nowhere/discardcache"

# stats --file: the statistics a server left in statsfile= (here after
# a clean stop), read without a server, in each format.
start_nbdkit -P "$dir/f.pid" -U "$dir/f.sock" "$PLUGIN" backend="$dir/disk.f" \
    statsfile="$dir/f.json" ctl=none
/usr/bin/python3 -c '
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
h.trim(65536, 0); h.trim(4096, 1 << 20)
h.shutdown()' "$dir/f.sock"
stop_pidfile "$dir/f.pid" nbdkit
[ -s "$dir/f.json" ] || fail "statsfile= left nothing"
expect 0 stats --file="$dir/f.json"
out_has "discardcache: 2 trims in, 2 discards out (68.0 KiB in, 68.0 KiB out)"
expect 0 stats --file="$dir/f.json" --json
cmp -s "$dir/out" "$dir/f.json" || fail "stats --file --json differs from the file"
expect 0 stats --file="$dir/f.json" --format=prometheus
out_has "discardcache_trims_total 2"
expect 0 stats --file="$dir/f.json" --watch=100ms --count=2
[ "$(grep -c "^discardcache: 2 trims in" "$dir/out")" -eq 2 ] ||
    { cat "$dir/out"; fail "stats --file --watch --count=2: not two samples"; }
# Its errors: no such file (3), not statistics (1), two sources or
# another command (2).
expect 3 stats --file="$dir/nonexistent.json"
out_has "--file=$dir/nonexistent.json: No such file or directory"
echo '{"a":1}' >"$dir/other.json"
expect 1 stats --file="$dir/other.json"
out_has "--file=$dir/other.json: not discardcache statistics"
expect 1 stats --file=/dev/null
expect 2 -s "$ctl" stats --file="$dir/f.json"
out_has "-s and --file name two sources"
expect 2 flush --file="$dir/f.json"
echo "discardctl: ok"
