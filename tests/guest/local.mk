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
	tests/guest/test-guest-restart-xfs.sh \
	tests/guest/test-guest-restart-ext4.sh \
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
	tests/guest/restart-host.sh \
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

# Restarts under XFS (two connections) and ext4 (one) through the keeper
# at the issue's counts (20 by SIGTERM, 5 by kill -9), one after the
# other in one guest (both run even when the first fails): per
# filesystem, the p50 and p99 of each stop's and start's time, of the
# pause each caused, and of that pause as a ratio to stop + start
# (under TCG only the ratios mean anything).  The results stay in
# bench-restart/.  5 to 6 minutes under TCG.
.PHONY: bench-restart
bench: bench-restart
bench-restart: all
	rm -rf '$(abs_top_builddir)/bench-restart'
	abs_top_srcdir='$(abs_top_srcdir)' abs_top_builddir='$(abs_top_builddir)' \
	  $(top_srcdir)/tests/guest/run --kernel 6.1 --timeout 2400 \
	  --out '$(abs_top_builddir)/bench-restart' -- /bin/bash -c \
	  '"$$1" 20 2 xfs 5; a=$$?; "$$1" 20 1 ext4 5; exit $$(( a | $$? ))' - \
	  '$(abs_top_srcdir)/tests/guest/restart-keeper.sh'; \
	status=$$?; \
	for fs in xfs ext4; do \
	  echo "== $$fs"; \
	  grep -hE '^(TERM|KILL) \(|^writer:|^content|^control|^verified|FAIL' \
	    '$(abs_top_builddir)/bench-restart/restart-'$$fs.result \
	    '$(abs_top_builddir)/bench-restart/restart-'$$fs.log; \
	done; \
	exit $$status

# discardublk against nbd and fuse + loop in a guest (tests/bench/ublk).
.PHONY: bench-ublk
bench: bench-ublk
bench-ublk: all
	$(top_srcdir)/tests/bench/ublk --out '$(abs_top_srcdir)/docs/benchmarks.md' '$(abs_top_builddir)'
EXTRA_DIST += tests/bench/ublk tests/bench/ublk-report.py tests/guest/ublk-bench.sh
