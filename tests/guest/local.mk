# SPDX-License-Identifier: BSD-3-Clause
# The guest tests: the card's line on Debian's own kernel under QEMU, with
# the kernel NBD client and emulated SATA, NVMe and SCSI disks
# (tests/guest/README.md).  Each boots one guest and runs several cases
# in it.  They skip (exit 77; under CI=true they fail) where QEMU,
# busybox-static, nbd-client or Debian's kernels are missing.
GUEST_TESTS = \
	tests/guest/test-guest-sata.sh \
	tests/guest/test-guest-nvme.sh \
	tests/guest/test-guest-scsi.sh \
	tests/guest/test-guest-multi.sh \
	tests/guest/test-guest-moved.sh \
	tests/guest/test-guest-restart.sh \
	tests/guest/test-guest-ublk.sh \
	tests/guest/test-guest-upgrade.sh
TESTS += $(GUEST_TESTS)
# The upgrade test installs the packages test-deb.sh builds and keeps.
tests/guest/test-guest-upgrade.log: tests/packaging/test-deb.log
EXTRA_DIST += $(GUEST_TESTS) \
	tests/guest/README.md \
	tests/guest/run \
	tests/guest/prepare \
	tests/guest/init \
	tests/guest/mkinitramfs.py \
	tests/guest/guest-lib.sh \
	tests/guest/host-lib.sh \
	tests/guest/card-lib.sh \
	tests/guest/card-disk.sh \
	tests/guest/card-multi.sh \
	tests/guest/card-main.sh \
	tests/guest/moved-disk.sh \
	tests/guest/restart-keeper.sh \
	tests/guest/restart-writer.py \
	tests/guest/upgrade-guest.sh \
	tests/guest/ublk-guest.sh \
	tests/guest/ublk-writer.py

# The benchmark in a guest (tests/bench/guest): its own section of
# docs/benchmarks.md, part of `make bench`.
.PHONY: bench-guest
bench: bench-guest
bench-guest: all
	$(top_srcdir)/tests/bench/guest --out '$(abs_top_srcdir)/docs/benchmarks.md' '$(abs_top_builddir)'
EXTRA_DIST += tests/bench/guest tests/guest/card-bench.sh

# Restarts under XFS through the keeper, at the issue's counts (20 by
# SIGTERM, 5 by kill -9): each stop's and start's time, and the pause
# each caused (p50 and p99), printed.  About 5 minutes under TCG.
.PHONY: bench-restart
bench: bench-restart
bench-restart: all
	abs_top_srcdir='$(abs_top_srcdir)' abs_top_builddir='$(abs_top_builddir)' \
	  $(top_srcdir)/tests/guest/run --kernel 6.1 --timeout 1200 -- \
	  '$(abs_top_srcdir)/tests/guest/restart-keeper.sh' 20 2 xfs 5

# discardublk against nbd and fuse + loop in a guest (tests/bench/ublk).
.PHONY: bench-ublk
bench: bench-ublk
bench-ublk: all
	$(top_srcdir)/tests/bench/ublk --out '$(abs_top_srcdir)/docs/benchmarks.md' '$(abs_top_builddir)'
EXTRA_DIST += tests/bench/ublk tests/bench/ublk-report.py tests/guest/ublk-bench.sh
