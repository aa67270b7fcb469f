#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages: dpkg-buildpackage -b -us -uc on a copy of the
# source tree (the files git tracks, and new ones it does not ignore:
# dpkg-buildpackage works in the tree it is given and writes beside it),
# then lintian with no error and no warning, then what the packages hold:
# the plugin alone in nbdkit's plugin directory (no .la), loadable;
# discardctl and discardfuse in /usr/bin, running; the man pages; the
# units; the completion; the postinst that restarts the servers on an
# upgrade.  The packages are kept in tests/packaging/debs/ of the build
# tree (for tests/guest/test-guest-upgrade.sh).  Prints how long the
# build and lintian took.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
# The packages a run that passed kept (below): gone at once, so that a
# run that fails or skips leaves none for the guest's upgrade test to install.
debs=$abs_top_builddir/tests/packaging/debs
rm -rf "$debs"
requires dpkg-buildpackage --version
requires command -v dh
requires lintian --version
requires "$NBDKIT" --version
git -C "$abs_top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    skip "$abs_top_srcdir is not a git checkout (the copy is made from git's list of files)"

mktempdir
src=$TESTDIR/discardcache
mkdir "$src"
(cd "$abs_top_srcdir" && git ls-files -z -co --exclude-standard) |
    (cd "$abs_top_srcdir" && tar -c --null -T -) | tar -x -C "$src" ||
    fail "cannot copy the source tree"
(cd "$src" && dpkg-checkbuilddeps) >"$TESTDIR/builddeps" 2>&1 ||
    skip "build dependencies missing: $(cat "$TESTDIR/builddeps") (scripts/install-deps installs them)"

unset MAKEFLAGS MFLAGS MAKELEVEL
start=$(date +%s)
(cd "$src" && DEB_BUILD_OPTIONS="parallel=$(nproc)" dpkg-buildpackage -b -us -uc) \
    >"$TESTDIR/build.log" 2>&1 ||
    { tail -n 60 "$TESTDIR/build.log"; fail "dpkg-buildpackage -b -us -uc failed"; }
built=$(date +%s)
grep -q '^# PASS: ' "$TESTDIR/build.log" || fail "the build ran no unit test"
! grep -q '^# FAIL: *[1-9]' "$TESTDIR/build.log" || fail "a unit test failed in the build"

changes=$(ls "$TESTDIR"/*.changes)
lintian --fail-on error,warning "$changes" >"$TESTDIR/lintian.out" 2>&1 ||
    { cat "$TESTDIR/lintian.out"; fail "lintian reports errors or warnings"; }
linted=$(date +%s)

plugin_deb=$(ls "$TESTDIR"/nbdkit-plugin-discardcache_*.deb)
tools_deb=$(ls "$TESTDIR"/discardcache_*.deb)
dpkg-deb -x "$plugin_deb" "$TESTDIR/plugin" || fail "cannot unpack $plugin_deb"
dpkg-deb -x "$tools_deb" "$TESTDIR/tools" || fail "cannot unpack $tools_deb"

# Ceph's libraries are loaded for backend=rbd: only: suggested, never
# a dependency.
for deb in "$plugin_deb" "$tools_deb"; do
    fields=$(dpkg-deb -f "$deb" Depends Pre-Depends Recommends) ||
        fail "cannot read the fields of $deb"
    ! grep -Ei 'librbd|librados|ceph' <<<"$fields" ||
        fail "$(basename "$deb") depends on Ceph's libraries (above)"
    dpkg-deb -f "$deb" Suggests | grep -qw librbd1 ||
        fail "$(basename "$deb") does not suggest librbd1"
done

plugindir=$(pkg-config --variable=plugindir nbdkit)
[ "$(ls "$TESTDIR/plugin$plugindir")" = nbdkit-discardcache-plugin.so ] ||
    fail "$plugindir in the package: $(ls "$TESTDIR/plugin$plugindir")"
[ -z "$(find "$TESTDIR/plugin" "$TESTDIR/tools" -name '*.la')" ] || fail "a .la in a package"
"$NBDKIT" --dump-plugin "$TESTDIR/plugin$plugindir/nbdkit-discardcache-plugin.so" |
    grep -q '^name=discardcache$' || fail "nbdkit cannot load the packaged plugin"
for p in discardctl discardfuse discardublk; do
    [ -x "$TESTDIR/tools/usr/bin/$p" ] || fail "no /usr/bin/$p in $tools_deb"
    [ -e "$TESTDIR/tools/usr/share/man/man1/$p.1.gz" ] || fail "no $p(1) in $tools_deb"
done
"$TESTDIR/tools/usr/bin/discardctl" --version | grep -q '^discardctl (discardcache) ' ||
    fail "the packaged discardctl does not run"
[ -e "$TESTDIR/plugin/usr/share/man/man1/nbdkit-discardcache-plugin.1.gz" ] ||
    fail "no nbdkit-discardcache-plugin(1)"
[ -e "$TESTDIR/plugin/lib/systemd/system/discardcache@.service" ] || fail "no discardcache@.service"
for u in discardfuse@.service discardfuse-loop@.service discardcache-prometheus.service \
         discardcache-prometheus.timer; do
    [ -e "$TESTDIR/tools/lib/systemd/system/$u" ] || fail "no $u in $tools_deb"
done
grep -q '^ExecStart=/usr/bin/discardfuse -f ' "$TESTDIR/tools/lib/systemd/system/discardfuse@.service" ||
    fail "discardfuse@.service does not run /usr/bin/discardfuse"
[ -x "$TESTDIR/tools/usr/libexec/discardcache/discardcache-helper" ] || fail "no helper"
[ -e "$TESTDIR/tools/usr/share/bash-completion/completions/discardctl" ] || fail "no completion"
# An upgrade restarts the running discardcache@NAME servers:
# debian/nbdkit-plugin-discardcache.postinst, merged with what debhelper
# adds.  tests/guest/test-guest-upgrade.sh runs it for real (and checks
# that the keeper's unit is left alone).
dpkg-deb -e "$plugin_deb" "$TESTDIR/plugin.ctl" || fail "cannot read the control files of $plugin_deb"
grep -q "deb-systemd-invoke try-restart" "$TESTDIR/plugin.ctl/postinst" ||
    fail "the plugin's postinst restarts no server"

# Kept for the guest's upgrade test (it depends on this test's log).
mkdir -p "$debs" && cp "$plugin_deb" "$tools_deb" "$debs/" ||
    fail "cannot keep the packages in $debs"
echo "deb: built in $((built - start)) s, lintian clean in $((linted - built)) s:" \
     "$(basename "$plugin_deb") $(basename "$tools_deb")"
