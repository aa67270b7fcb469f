# SPDX-License-Identifier: BSD-3-Clause
# The nbdkit plugin, installed in nbdkit's plugindir so that
# `nbdkit discardcache ...` finds it by its short name.
plugin_LTLIBRARIES += nbd-plugin/nbdkit-discardcache-plugin.la
nbd_plugin_nbdkit_discardcache_plugin_la_SOURCES = \
	nbd-plugin/plugin.c \
	nbd-plugin/conn-sockets.c \
	nbd-plugin/conn-sockets.h \
	nbd-plugin/log-nbdkit.c \
	nbd-plugin/stop.c \
	nbd-plugin/stop.h
nbd_plugin_nbdkit_discardcache_plugin_la_CFLAGS = $(AM_CFLAGS) $(NBDKIT_CFLAGS)
nbd_plugin_nbdkit_discardcache_plugin_la_LIBADD = libservice.la $(LIBNBD_LIBS) $(ZSTD_LIBS)
nbd_plugin_nbdkit_discardcache_plugin_la_LDFLAGS = \
	$(AM_LDFLAGS) -module -avoid-version -shared

man1_MANS += nbd-plugin/nbdkit-discardcache-plugin.1
EXTRA_DIST += nbd-plugin/nbdkit-discardcache-plugin.pod
CLEANFILES += nbd-plugin/nbdkit-discardcache-plugin.1

nbd-plugin/nbdkit-discardcache-plugin.1: nbd-plugin/nbdkit-discardcache-plugin.pod
	$(AM_V_GEN)$(MKDIR_P) nbd-plugin && \
	$(POD2MAN) --section=1 --center="discardcache" --release="$(PACKAGE_VERSION)" \
	  --name=nbdkit-discardcache-plugin $< > $@.tmp && mv $@.tmp $@

# nbdkit loads the .so alone; the libtool archive is of no use there
# (and nbdkit's bash completion would list the plugin twice).  plugindir
# is not an exec directory, so the plugin is installed by install-data:
# remove the .la after it.  Without the .la, libtool's uninstall does
# not know the .so: remove that too.
install-data-hook: remove-plugin-la
remove-plugin-la:
	rm -f $(DESTDIR)$(plugindir)/nbdkit-discardcache-plugin.la
uninstall-hook: uninstall-plugin-so
uninstall-plugin-so:
	rm -f $(DESTDIR)$(plugindir)/nbdkit-discardcache-plugin.so
.PHONY: remove-plugin-la uninstall-plugin-so

# distcheck installs under its own prefix, not into the system's nbdkit,
# systemd or bash-completion directories.
AM_DISTCHECK_CONFIGURE_FLAGS = --with-plugindir='$${libdir}/nbdkit/plugins' \
	--with-systemdsystemunitdir='$${prefix}/lib/systemd/system' \
	--with-bashcompletiondir='$${datadir}/bash-completion/completions'
