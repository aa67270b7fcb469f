#!/usr/bin/env bash
# discardcache: every bad parameter stops nbdkit before it serves, with a
# message that names the key.  Each row: expected word in the error, then
# the arguments after the plugin.
source "${abs_top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires "$NBDKIT" --version

mktempdir
dir=$TESTDIR
truncate -s 16M "$dir/disk"
mkdir "$dir/adir"
mkfifo "$dir/fifo"
touch "$dir/ro"; chmod 0444 "$dir/ro"
ok="backend=$dir/disk"

cases=(
  "unknown parameter|$ok colour=blue"
  "backend parameter is required|delay=1s"
  "delay=|$ok delay=soon"
  "delay=|$ok delay=-1s"
  "idle=|$ok idle=1.5s"
  "minlen=|$ok minlen=-4k"
  "minlen=|$ok minlen=lots"
  "granularity=|$ok granularity=3000"
  "granularity=|$ok granularity=0"
  "max-discard=|$ok max-discard=100"
  "max-extents=|$ok max-extents=0"
  "rate=|$ok rate=fast"
  "on-full=|$ok on-full=explode"
  "passthrough=|$ok passthrough=maybe"
  "flush-discards=|$ok flush-discards=2"
  "backend|backend=$dir/missing"
  "backend|backend=$dir/adir"
  "backend|backend=$dir/fifo"
  "backend|backend=nbd+unix:///?socket=$dir/nosuchsock"
)
# Root ignores file modes, so only check the read-only case as a user.
if [ "$(id -u)" -ne 0 ]; then
  cases+=("$dir/ro|backend=$dir/ro")
fi

failures=0
for row in "${cases[@]}"; do
  want=${row%%|*}
  read -r -a args <<< "${row#*|}"
  if timeout 60 "$NBDKIT" -f -U "$dir/sock" --run true "$PLUGIN" "${args[@]}" \
       >"$dir/out" 2>&1; then
    echo "FAIL: accepted: ${args[*]}"; failures=$((failures + 1)); continue
  fi
  if ! grep -qF -- "$want" "$dir/out"; then
    echo "FAIL: ${args[*]}: message does not name '$want':"; cat "$dir/out"
    failures=$((failures + 1)); continue
  fi
  echo "ok: ${args[*]} -> $(grep -F -- "$want" "$dir/out" | head -n 1)"
done
# And the good line serves.
timeout 60 "$NBDKIT" -f -U "$dir/sock" --run 'nbdinfo "$uri"' "$PLUGIN" "$ok" \
  delay=200ms idle=10ms granularity=64k max-discard=1M max-extents=1k \
  on-full=drop rate=100 >"$dir/out" 2>&1 || { cat "$dir/out"; fail "good parameters refused"; }
grep -q "can_trim: true" "$dir/out" || { cat "$dir/out"; fail "trim not advertised"; }
[ "$failures" -eq 0 ] || fail "$failures bad parameters not refused properly"
echo "params: ok (${#cases[@]} bad inputs refused)"
