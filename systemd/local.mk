# SPDX-License-Identifier: BSD-3-Clause
# The systemd units (see each file's head), the helper they run, and the
# example configuration.  The units name the installed programs, so they
# are made from their .in files with the configured paths.
systemd_units = \
	systemd/discardcache@.service \
	systemd/discardcache-nbd@.service \
	systemd/discardfuse@.service \
	systemd/discardfuse-loop@.service \
	systemd/discardcache-prometheus.service
# discardublk's unit where discardublk is built (liburing).
if HAVE_LIBURING
systemd_units += systemd/discardublk@.service
endif
systemd_generated = $(systemd_units) systemd/discardcache-helper

if INSTALL_SYSTEMD_UNITS
systemdsystemunit_DATA = $(systemd_units) systemd/discardcache-prometheus.timer
endif
pkglibexec_SCRIPTS = systemd/discardcache-helper
examplesdir = $(docdir)/examples
examples_DATA = systemd/example.conf
# Built with everything else: the tests check them in the build tree.
noinst_DATA = $(systemd_generated)

EXTRA_DIST += \
	systemd/discardcache@.service.in \
	systemd/discardcache-nbd@.service.in \
	systemd/discardfuse@.service.in \
	systemd/discardfuse-loop@.service.in \
	systemd/discardublk@.service.in \
	systemd/discardcache-prometheus.service.in \
	systemd/discardcache-helper.in \
	systemd/discardcache-prometheus.timer \
	systemd/example.conf
CLEANFILES += $(systemd_generated)

systemd_subst = sed \
	-e 's|@NBDKIT[@]|$(NBDKIT)|g' \
	-e 's|@bindir[@]|$(bindir)|g' \
	-e 's|@pkglibexecdir[@]|$(pkglibexecdir)|g'

systemd/discardcache@.service: systemd/discardcache@.service.in
systemd/discardcache-nbd@.service: systemd/discardcache-nbd@.service.in
systemd/discardfuse@.service: systemd/discardfuse@.service.in
systemd/discardfuse-loop@.service: systemd/discardfuse-loop@.service.in
systemd/discardublk@.service: systemd/discardublk@.service.in
systemd/discardcache-prometheus.service: systemd/discardcache-prometheus.service.in
systemd/discardcache-helper: systemd/discardcache-helper.in
$(systemd_generated): Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	$(systemd_subst) < $(srcdir)/$@.in > $@.tmp && \
	if test $@ = systemd/discardcache-helper; then chmod 0755 $@.tmp; fi && \
	mv $@.tmp $@
