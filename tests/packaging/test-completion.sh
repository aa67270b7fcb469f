#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardctl's bash completion, in bash itself: source the file, set
# COMP_LINE/COMP_POINT and COMP_WORDS/COMP_CWORD as bash does for a line
# typed so far, call the function complete(1) names for discardctl, and
# compare COMPREPLY.  Commands, options per command, --format's values,
# set's keys with their = (each one a key a live server accepts), and
# for -s the live sockets in the default directory (not a socket whose
# server is gone) besides files.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version

completion=$abs_top_srcdir/bash-completion/discardctl
mktempdir
dir=$TESTDIR
xdg=$dir/xdg
mkdir -p "$xdg/discardcache"
export XDG_RUNTIME_DIR=$xdg

source "$completion" || fail "cannot source $completion"
func=$(complete -p discardctl 2>/dev/null | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
[ -n "$func" ] || fail "$completion does not register a function for discardctl"

# reply LINE: complete LINE (the cursor at its end); sets $got.
reply ()
{
    COMP_LINE=$1
    COMP_POINT=${#1}
    # COMP_WORDS as bash splits the line (at spaces, =, : ...).
    local IFS=$' \t\n'
    read -ra COMP_WORDS <<<"$(sed 's/\([=:]\)/ \1 /g' <<<"$1")"
    [[ $1 == *[[:space:]] || $1 == *[=:] ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMPREPLY=()
    "$func" discardctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]:-}"
    got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
}

# expect LINE WORD...: the completions of LINE are exactly WORD...
expect ()
{
    local line=$1 want
    shift
    reply "$line"
    want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
    [ "$got" = "$want" ] || fail "completing '$line': got '$got', expected '$want'"
}

expect "discardctl " stats flush dump pause resume set forget-clean attach detach \
    -s --socket= -h --help -V --version
expect "discardctl st" stats
expect "discardctl -s /x.sock fl" flush
expect "discardctl stats --" --json --format= --watch --watch= --count= --file=
expect "discardctl stats --f" --format= --file=
expect "discardctl stats --format=" table json prometheus
expect "discardctl stats --format=pro" prometheus
expect "discardctl flush --" --wait --progress --reserve --json
expect "discardctl dump --" --json --map
expect "discardctl pause "
expect "discardctl set " delay= minlen= idle= rate= budget=
expect "discardctl set de" delay=
expect "discardctl set delay=5s i" idle=
expect "discardctl set delay=5"
expect "discardctl forget-clean --" --json
expect "discardctl attach --" --connections= --dead-timeout= --foreground --log= --adopt
expect "discardctl attach --d" --dead-timeout=

# Each key it offers, a live server accepts.
truncate -s 16M "$dir/disk"
start_nbdkit -P "$dir/pid" -U "$dir/nbd.sock" "$PLUGIN" backend="$dir/disk"
pid=$(cat "$dir/pid")
wait_for_ctl "$xdg/discardcache/$pid.sock"
reply "discardctl set "
for key in $got; do
    case $key in
        delay=|idle=) value=1s ;;
        budget=) value=2ms ;;
        rate=) value=100 ;;
        *) value=4k ;;
    esac
    "$DISCARDCTL" set "$key$value" >"$dir/out" 2>&1 ||
        { cat "$dir/out"; fail "completion offers $key, which set refuses"; }
done

# -s: the live socket, then files; a socket whose server is gone is not
# offered.
/usr/bin/python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
    "$xdg/discardcache/2147483646.sock"
reply "discardctl -s "
[[ " $got " == *" $xdg/discardcache/$pid.sock "* ]] || fail "-s: the live socket not offered: $got"
[[ " $got " != *"2147483646.sock"* ]] || fail "-s: a dead server's socket offered: $got"
touch "$dir/some-file"
expect "discardctl -s $dir/some-" "$dir/some-file"
expect "discardctl --socket=$xdg/discardcache/$pid" "$xdg/discardcache/$pid.sock"
reply "discardctl stats --file=$dir/some"
[ "$got" = "$dir/some-file " ] || fail "--file=: got '$got'"
echo "completion: ok"
