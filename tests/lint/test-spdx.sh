#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every source file git tracks (or would: untracked files that are not
# ignored count too, so a new file fails here before its commit) carries
# the SPDX line of LICENSE in its first lines: line 1, or line 2 after a
# shebang.  Source files: C, headers, shell, Python, automake and
# autoconf input, pod, systemd units, the bash completion, debian/rules
# and any other file that starts with #!.  Each file without it is named.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"

cd "$abs_top_srcdir" || fail "cannot cd to $abs_top_srcdir"
git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    skip "$abs_top_srcdir is not a git checkout (the check reads git's list of files)"
grep -q '^Redistribution and use in source and binary forms' LICENSE ||
    fail "LICENSE is missing or is not the BSD-3-Clause text"

tag='SPDX-License-Identifier: BSD-3-Clause'

# is_source FILE LINE1: whether FILE (whose first line is LINE1) is a
# kind of file that carries the tag.
is_source ()
{
    case $1 in
        debian/*.*) return 1 ;;     # data: control, changelog, *.install ...
        *.c|*.h|*.sh|*.py|*.mk|*.am|*.ac|*.pod|*.service|*.timer|*.bash) return 0 ;;
        bash-completion/*|systemd/*|debian/rules) return 0 ;;
    esac
    [[ $2 == '#!'* ]]
}

# Builtins only in the loop: a process or two a file made this slow.
checked=0
missing=()
while IFS= read -r -d '' f; do
    [ -f "$f" ] || continue
    l1= l2=
    { IFS= read -r l1; IFS= read -r l2; } <"$f" 2>/dev/null
    is_source "$f" "$l1" || continue
    checked=$(( checked + 1 ))
    if [[ $l1 == '#!'* ]]; then
        [[ $l2 == *"$tag"* ]] || missing+=("$f (line 2, after the #! line)")
    else
        [[ $l1 == *"$tag"* ]] || missing+=("$f (line 1)")
    fi
done < <(git ls-files -z --cached --others --exclude-standard)

[ "$checked" -gt 150 ] || fail "only $checked source files found: is this the discardcache tree?"
if [ "${#missing[@]}" -gt 0 ]; then
    printf '%s: FAIL: no "%s" in:\n' "$0" "$tag" >&2
    printf '  %s\n' "${missing[@]}" >&2
    echo "  (C: /* $tag */ as line 1; shell, Python, make: # $tag, after any #! line;" >&2
    echo "   configure.ac: dnl $tag; pod: # $tag then a blank line)" >&2
    exit 1
fi
echo "spdx: $checked source files carry the tag"
