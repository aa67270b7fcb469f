#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardfuse: every bad input is refused before anything is mounted,
# with a non-zero exit and a message naming the key or the mountpoint.
# Each row: expected words in the error, then the arguments.  Then /dev/fuse
# hidden in a private mount namespace gives a clear error, and the good
# line mounts (foreground and daemon) and unmounts cleanly.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires_fuse
requires unshare --version

mktempdir
dir=$TESTDIR
truncate -s 16M "$dir/disk"
mkdir "$dir/mnt" "$dir/full" "$dir/adir"
touch "$dir/full/something" "$dir/afile"
mkfifo "$dir/fifo"
ok="backend=$dir/disk"
mnt=$dir/mnt

cases=(
  "missing MOUNTPOINT|$ok"
  "missing MOUNTPOINT|$ok delay=1s"
  "mountpoint $dir/nosuch|$ok $dir/nosuch"
  "mountpoint $dir/afile: not a directory|$ok $dir/afile"
  "mountpoint $dir/full: not empty|$ok $dir/full"
  "unexpected argument|$dir/disk $mnt $dir/adir"
  "backend given twice|$ok $dir/disk $mnt"
  "unknown parameter 'colour'|$ok colour=blue $mnt"
  "backend parameter is required|delay=1s $mnt"
  "delay=|$ok delay=soon $mnt"
  "delay=|$ok -o delay=-1s $mnt"
  "idle=|$ok idle=1.5.5s $mnt"
  "budget=|$ok -o budget=1e3ms $mnt"
  "minlen=|$ok minlen=lots $mnt"
  "granularity=|$ok granularity=3000 $mnt"
  "max-discard=|$ok max-discard=100 $mnt"
  "max-extents=|$ok max-extents=0 $mnt"
  "max-clean-extents=|$ok max-clean-extents=lots $mnt"
  "rate=|$ok rate=fast $mnt"
  "on-full=|$ok on-full=explode $mnt"
  "passthrough=|$ok passthrough=maybe $mnt"
  "flush-discards=|$ok flush-discards=2 $mnt"
  "readonly=|$ok readonly=perhaps $mnt"
  "statsfile|$ok statsfile= $mnt"
  "writeback_cache|$ok -o writeback_cache $mnt"
  "colour=blue|$ok -o colour=blue $mnt"
  "backend|backend=$dir/missing $mnt"
  "backend|backend=$dir/adir $mnt"
  "backend|backend=$dir/fifo $mnt"
  "backend|backend=nbd+unix:///?socket=$dir/nosuchsock $mnt"
)

# mounted: whether anything is mounted on or under $dir.
mounted ()
{
    grep -qF " $dir/" /proc/mounts
}

failures=0
for row in "${cases[@]}"; do
    want=${row%%|*}
    read -r -a args <<< "${row#*|}"
    if timeout 60 "$DISCARDFUSE" -f "${args[@]}" >"$dir/out" 2>&1; then
        echo "FAIL: accepted: ${args[*]}"; failures=$((failures + 1))
        fusermount3 -u "$mnt" 2>/dev/null
        continue
    fi
    if mounted; then
        echo "FAIL: ${args[*]}: refused, but something is mounted:"
        grep -F " $dir/" /proc/mounts
        fusermount3 -u "$mnt" 2>/dev/null
        failures=$((failures + 1)); continue
    fi
    if ! grep -qF -- "$want" "$dir/out"; then
        echo "FAIL: ${args[*]}: message does not name '$want':"; cat "$dir/out"
        failures=$((failures + 1)); continue
    fi
    echo "ok: ${args[*]} -> $(grep -F -- "$want" "$dir/out" | head -n 1)"
done
[ -z "$(ls -A "$dir/full" | grep -v something)" ] || fail "the non-empty mountpoint was changed"

# No /dev/fuse: hide /dev behind an empty tmpfs in a private namespace.
if unshare -m sh -c 'mount -t tmpfs none /dev && exec "$0" -f "$@"' \
     "$DISCARDFUSE" "$ok" "$mnt" >"$dir/out" 2>&1; then
    echo "FAIL: mounted without /dev/fuse"; failures=$((failures + 1))
elif ! grep -q "/dev/fuse.*FUSE is not available" "$dir/out"; then
    echo "FAIL: no clear error without /dev/fuse:"; cat "$dir/out"
    failures=$((failures + 1))
else
    echo "ok: no /dev/fuse -> $(head -n 1 "$dir/out")"
fi
mounted && fail "something is mounted after the refused inputs"
[ "$failures" -eq 0 ] || fail "$failures bad inputs not refused properly"

# The good line, in the foreground, with the keys also as -o, the
# backend bare and a relative mountpoint.
(cd "$dir" && exec "$DISCARDFUSE" -f "$dir/disk" -o delay=1.5s,idle=0.01 \
    budget=1.2ms granularity=64k max-discard=1M max-extents=1k on-full=drop rate=100 \
    max-clean-extents=off statsfile=stats.json mnt) &
pid=$!
cleanup_fn stop_discardfuse "$mnt" "$pid"
wait_for_file "$mnt/disk" || fail "good parameters: $mnt/disk did not appear"
[ "$(stat -c %s "$mnt/disk")" -eq $((16 * 1024 * 1024)) ] || fail "disk has the wrong size"
grep -qF " $mnt fuse.discardfuse " /proc/mounts || fail "not in /proc/mounts as fuse.discardfuse"
stop_discardfuse "$mnt" "$pid" || fail "discardfuse exited with status $? after fusermount3 -u"
mounted && fail "still mounted after fusermount3 -u"
[ -s "$dir/stats.json" ] || fail "relative statsfile= not written (in $dir)"
[ "$(json_get "$dir/stats.json" granularity)" -eq 65536 ] || fail "granularity=64k not applied"
[ "$(json_get "$dir/stats.json" max_clean_extents)" -eq 0 ] || fail "max-clean-extents=off not applied"
[ "$(json_get "$dir/stats.json" budget_us)" -eq 2000 ] || fail "budget=1.2ms not applied as 2 ms"

# Daemon mode: the parent returns once mounted; the daemon stops
# cleanly (statistics written) on fusermount3 -u.
rm -f "$dir/stats.json"
"$DISCARDFUSE" "$ok" statsfile="$dir/stats.json" "$mnt" || fail "daemon mode failed"
cleanup_fn stop_discardfuse "$mnt" ""
[ -e "$mnt/disk" ] || fail "daemon mode: $mnt/disk is not there when the parent returns"
fusermount3 -u "$mnt" || fail "fusermount3 -u failed"
wait_for_file "$dir/stats.json" || fail "daemon mode: no statistics after unmount (no clean stop)"
echo "params: ok (${#cases[@]} bad inputs refused, no /dev/fuse refused, good line mounted)"
