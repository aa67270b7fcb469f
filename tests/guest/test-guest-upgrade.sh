#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# In a guest with systemd as PID 1 (Debian 12's 6.1 kernel, one vCPU):
# the Debian packages installed, XFS on /dev/nbd0 through
# discardcache-nbd@up's keeper and discardcache@up's server, a writer
# that fsyncs; three `systemctl restart discardcache@up`, the keeper
# killed (its unit adopts the device), and an upgrade (dpkg -i of the
# same packages with a higher version), first forbidden by policy-rc.d,
# then allowed, whose postinst restarts the server: no error, the
# server's pid changed at each restart, the keeper's only when killed,
# every file intact, xfs_repair -n clean (tests/guest/upgrade-guest.sh).
#
# The packages are tests/packaging/test-deb.sh's, kept in the build
# tree's tests/packaging/debs/ (make orders this test after that one).
# The higher version is made here: dpkg-deb -R, Version: +upgradetest1,
# dpkg-deb -b.
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/guest/host-lib.sh"
requires dpkg-deb --version
guest_test_setup
debs=$abs_top_builddir/tests/packaging/debs
ls "$debs"/nbdkit-plugin-discardcache_*.deb "$debs"/discardcache_*.deb > /dev/null 2>&1 ||
    skip "no packages in $debs (tests/packaging/test-deb.sh builds them)"

mkdir -p "$GOUT/debs/old" "$GOUT/debs/new" "$TESTDIR/repack"
for deb in "$debs"/nbdkit-plugin-discardcache_*.deb "$debs"/discardcache_*.deb; do
    cp "$deb" "$GOUT/debs/old/" || fail "cannot copy $deb"
    tree=$TESTDIR/repack/$(basename "$deb" .deb)
    dpkg-deb -R "$deb" "$tree" || fail "dpkg-deb -R $deb failed"
    sed -i 's/^Version: .*/&+upgradetest1/' "$tree/DEBIAN/control"
    dpkg-deb --root-owner-group -b "$tree" "$GOUT/debs/new/" > /dev/null ||
        fail "dpkg-deb -b $tree failed"
done

# What the boot starts besides basic.target and this guest has no use
# for.
masks=()
for u in lvm2-monitor.service blk-availability.service systemd-timesyncd.service \
         systemd-binfmt.service proc-sys-fs-binfmt_misc.automount; do
    masks+=(--mask "$u")
done
guest_run --kernel 6.1 --init systemd "${masks[@]}" --timeout 600 -- \
    "$abs_top_srcdir/tests/guest/upgrade-guest.sh" "$GOUT/debs"
cat "$GOUT/upgrade.result"
