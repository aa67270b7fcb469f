#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: every bad parameter stops nbdkit before it serves, with
# exit status 1 (never a crash) and a message that names the key.  Each
# row: the words the message must contain, then the arguments after the
# plugin; "backend=DISK" is added unless the row names a backend or
# starts with "!".  Rows in as_nobody run as the user nobody (root
# ignores file modes); they are skipped when that is not possible.
#
#   tests/e2e/test-plugin-params.sh --markdown   also prints the table of
#   inputs, exit statuses and messages (docs/reliability.md).
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version

markdown=false
[ "${1:-}" = --markdown ] && markdown=true

mktempdir
dir=$TESTDIR
chmod 0755 "$dir"
truncate -s 16M "$dir/disk"
mkdir "$dir/adir"
mkfifo "$dir/fifo"
truncate -s 16M "$dir/ro" "$dir/unreadable"
chmod 0444 "$dir/ro"
chmod 0600 "$dir/unreadable"
mkdir "$dir/nobody"             # where nobody may create its socket
ok="backend=$dir/disk"

cases=(
  # keys
  "unknown parameter 'colour'|colour=blue"
  "unknown parameter 'Delay'|Delay=1s"
  "backend parameter is required|!delay=1s"
  "backend: empty value|backend="
  # durations
  "delay=soon|delay=soon"
  "delay=-1s|delay=-1s"
  "delay=1e9h|delay=1e9h"
  "delay=s|delay=s"
  "delay=1.s|delay=1.s"
  "delay=10d|delay=10d"
  "delay=: invalid|delay="
  "delay=99999999999999999999|delay=99999999999999999999"
  "idle=1.5.5s|idle=1.5.5s"
  "budget=-0.5ms|budget=-0.5ms"
  "idle=-5ms|idle=-5ms"
  # sizes
  "minlen=-4k|minlen=-4k"
  "minlen=lots|minlen=lots"
  "minlen=1.5k|minlen=1.5k"
  "minlen=4kk|minlen=4kk"
  "minlen=99999999999E|minlen=99999999999E"
  "max-discard=100|max-discard=100"
  "max-discard=-1|max-discard=-1"
  "max-discard=auto2|max-discard=auto2"
  "max-discard=4096: must be at least the granularity|max-discard=4k granularity=64k"
  # granularity: a power of two, within the backend's limits
  "granularity=3000|granularity=3000"
  "granularity=0|granularity=0"
  "granularity=12k|granularity=12k"
  "granularity=-4096|granularity=-4096"
  "granularity=1024: must be at least the backend's|granularity=1k"
  "granularity=2147483648: larger than the backend's|granularity=2G"
  # counts
  "max-extents=0|max-extents=0"
  "max-extents=-5|max-extents=-5"
  "max-extents=lots|max-extents=lots"
  "max-extents=1.5M|max-extents=1.5M"
  "max-clean-extents=lots: invalid value: expected off, or a count|max-clean-extents=lots"
  "max-clean-extents=-1|max-clean-extents=-1"
  "rate=fast|rate=fast"
  "rate=-1|rate=-1"
  "rate=1000001|rate=1000001"
  # words and booleans
  "on-full=explode|on-full=explode"
  "on-full=: invalid|on-full="
  "passthrough=maybe|passthrough=maybe"
  "flush-discards=2|flush-discards=2"
  "readonly=perhaps|readonly=perhaps"
  # statsfile
  "statsfile: empty value|statsfile="
  "statsfile=/nonexistent/dir/stats.json: cannot write|statsfile=/nonexistent/dir/stats.json"
  "statsfile=$dir/adir: is a directory|statsfile=$dir/adir"
  # backends
  "backend=$dir/missing: No such file|backend=$dir/missing"
  "backend=$dir/adir: is a directory|backend=$dir/adir"
  "backend=$dir/fifo: not a regular file or block device|backend=$dir/fifo"
  "backend=/dev/null: not a regular file or block device|backend=/dev/null"
  "backend=nbd+unix:///?socket=$dir/nosuchsock|backend=nbd+unix:///?socket=$dir/nosuchsock"
  "backend=nbd://127.0.0.1:1|backend=nbd://127.0.0.1:1"
  "backend=nbd+unix:///?socket=|backend=nbd+unix:///?socket="
)
as_nobody=(
  "backend=$dir/ro: cannot open for writing|backend=$dir/ro"
  "backend=$dir/unreadable: Permission denied|backend=$dir/unreadable"
  "backend=$dir/unreadable: Permission denied|backend=$dir/unreadable readonly=true"
  "statsfile=$dir/adir/stats.json: cannot write|statsfile=$dir/adir/stats.json"
)

# How to run nbdkit as another user: as root, setpriv to nobody; as any
# other user, that user already lacks root's override of file modes.
nobody=()
if [ "$(id -u)" -ne 0 ]; then
    nobody=(env)
elif command -v setpriv >/dev/null &&
     setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
    chown nobody "$dir/nobody"
    nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi

table=()
failures=0
tried=0

# try WANT USER-PREFIX... -- ARGS: nbdkit must exit 1 naming WANT.
try ()
{
    local want=$1 sock=$dir/sock status msg
    shift
    local -a prefix=()
    while [ "$1" != -- ]; do prefix+=("$1"); shift; done
    shift
    [ ${#prefix[@]} -gt 0 ] && sock=$dir/nobody/sock
    tried=$((tried + 1))
    "${prefix[@]}" timeout 60 "$NBDKIT" -f -U "$sock" --run true "$PLUGIN" "$@" \
        >"$dir/out" 2>&1
    status=$?
    msg=$(grep -m1 'error:' "$dir/out" | sed 's/^nbdkit: \(.*: \)\?error: //')
    table+=("| \`${*//$dir/DIR}\` | $status | ${msg//$dir/DIR} |")
    if [ "$status" -ne 1 ]; then
        echo "FAIL: exit status $status (not 1): $*"; cat "$dir/out"
        failures=$((failures + 1)); return
    fi
    if ! grep -qF -- "$want" "$dir/out"; then
        echo "FAIL: $*: message does not name '$want':"; cat "$dir/out"
        failures=$((failures + 1)); return
    fi
    echo "ok: $* -> $msg"
}

# row_args ROW: the arguments of a row, with the default backend.
row_args ()
{
    local rest=${1#*|}
    case $rest in
        '!'*) echo "${rest#!}" ;;
        *backend=*) echo "$rest" ;;
        *) echo "$ok $rest" ;;
    esac
}

for row in "${cases[@]}"; do
    read -r -a args <<< "$(row_args "$row")"
    try "${row%%|*}" -- "${args[@]}"
done
if [ ${#nobody[@]} -gt 0 ]; then
    for row in "${as_nobody[@]}"; do
        read -r -a args <<< "$(row_args "$row")"
        try "${row%%|*}" "${nobody[@]}" -- "${args[@]}"
    done
else
    echo "as_nobody rows skipped: cannot switch to the user nobody"
fi

# And the good lines serve.
timeout 60 "$NBDKIT" -f -U "$dir/sock" --run 'nbdinfo "$uri"' "$PLUGIN" "$ok" \
  delay=1.5s idle=0.01 budget=1.2ms granularity=64k max-discard=1M max-extents=1k \
  max-clean-extents=2k on-full=drop rate=100 statsfile="$dir/stats.json" >"$dir/out" 2>&1 ||
  { cat "$dir/out"; fail "good parameters refused"; }
grep -q "can_trim: true" "$dir/out" || { cat "$dir/out"; fail "trim not advertised"; }
wait_for_file "$dir/stats.json" || fail "good parameters: no statistics"
[ "$(json_get "$dir/stats.json" max_clean_extents)" -eq 2048 ] ||
    fail "max-clean-extents=2k not applied"
[ "$(json_get "$dir/stats.json" budget_us)" -eq 2000 ] ||
    fail "budget=1.2ms not applied as 2 ms (whole milliseconds, rounded up)"
if [ ${#nobody[@]} -gt 0 ]; then
  "${nobody[@]}" timeout 60 "$NBDKIT" -f -U "$dir/nobody/sock" --run 'nbdinfo "$uri"' \
    "$PLUGIN" backend="$dir/ro" readonly=true >"$dir/out" 2>&1 ||
    { cat "$dir/out"; fail "a read-only backend served read-only was refused"; }
  grep -q "is_read_only: true" "$dir/out" || { cat "$dir/out"; fail "not read-only"; }
fi

if $markdown; then
    echo
    echo "| Input (DIR: a scratch directory; DIR/disk: a 16 MiB file) | Exit | Message |"
    echo "| --- | --- | --- |"
    printf '%s\n' "${table[@]}"
fi
[ "$failures" -eq 0 ] || fail "$failures of $tried bad inputs not refused properly"
echo "params: ok ($tried bad inputs refused, each naming its key)"
