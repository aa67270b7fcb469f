#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make install DESTDIR=...: the plugin in nbdkit's plugin directory as a
# .so alone (no libtool .la, which nbdkit's bash completion would list
# as a second plugin), discardfuse and discardctl in bin, the man pages
# in section 1, the units with the configured paths, the helper, the
# bash completion; then make uninstall leaves no file behind.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/packaging/install-lib.sh"
requires make --version

mktempdir
dest=$TESTDIR/root
plugindir=$(make_dir plugindir)
bindir=$(make_dir bindir)
man1dir=$(make_dir man1dir)
unitdir=$(make_dir systemdsystemunitdir)
completiondir=$(make_dir bashcompletiondir)
helperdir=$(make_dir pkglibexecdir)
[ -n "$plugindir" ] && [ -n "$bindir" ] || fail "cannot read the directories from the Makefile"

install_tree "$dest"

# has FILE [MODE-TEST]: FILE is installed (test -x for programs).
has ()
{
    [ -e "$dest$1" ] || { (cd "$dest" && find . -type f | sort); fail "not installed: $1"; }
    [ "${2:-}" != -x ] || [ -x "$dest$1" ] || fail "not executable: $1"
}

plugins=$(cd "$dest$plugindir" && ls)
[ "$plugins" = nbdkit-discardcache-plugin.so ] ||
    fail "the plugin directory holds '$(echo $plugins)', not the .so alone"
has "$bindir/discardfuse" -x
has "$bindir/discardctl" -x
for m in discardctl discardfuse nbdkit-discardcache-plugin; do
    has "$man1dir/$m.1"
done
# discardublk where configure found liburing.
if [ -x "$abs_top_builddir/ublk/discardublk" ]; then
    has "$bindir/discardublk" -x
    has "$man1dir/discardublk.1"
fi
[ -z "$(find "$dest" -name '*.8' -o -name '*.la' -o -path '*/sbin/*')" ] ||
    fail "left over from before: $(find "$dest" -name '*.8' -o -name '*.la' -o -path '*/sbin/*')"
if [ "$unitdir" != no ]; then
    for u in discardcache@.service discardcache-nbd@.service discardfuse@.service discardfuse-loop@.service \
             discardcache-prometheus.service discardcache-prometheus.timer; do
        has "$unitdir/$u"
    done
    grep -qF "ExecStart=$bindir/discardfuse -f" "$dest$unitdir/discardfuse@.service" ||
        fail "discardfuse@.service does not run $bindir/discardfuse"
    grep -qF "$helperdir/discardcache-helper" "$dest$unitdir/discardcache-prometheus.service" ||
        fail "discardcache-prometheus.service does not run $helperdir/discardcache-helper"
    ! grep -q '@[A-Za-z_]*@' "$dest$unitdir"/* || fail "a unit kept an @VARIABLE@"
fi
has "$helperdir/discardcache-helper" -x
[ "$completiondir" = no ] || has "$completiondir/discardctl"

"$NBDKIT" --dump-plugin "$dest$plugindir/nbdkit-discardcache-plugin.so" >/dev/null ||
    fail "nbdkit cannot load the installed plugin"

make -C "$abs_top_builddir" uninstall DESTDIR="$dest" >"$TESTDIR/uninstall.log" 2>&1 ||
    { tail -n 30 "$TESTDIR/uninstall.log"; fail "make uninstall failed"; }
left=$(find "$dest" -type f)
[ -z "$left" ] || fail "make uninstall left: $left"
echo "install: the plugin alone in $plugindir, discardctl and discardfuse in $bindir; uninstall clean"
