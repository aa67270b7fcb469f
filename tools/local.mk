# SPDX-License-Identifier: BSD-3-Clause
# discardctl: the control socket's client, installed in bin (a user may
# run it against the servers the user runs) with its man page
# (discardctl.1 from discardctl.pod, as the plugin's).
bin_PROGRAMS += tools/discardctl
tools_discardctl_SOURCES = \
	tools/discardctl.c \
	tools/ctl-client.c \
	tools/ctl-client.h \
	tools/human.c \
	tools/human.h \
	common/json-flat.c \
	tools/progress.c \
	tools/progress.h \
	tools/stats-format.c \
	tools/stats-format.h \
	common/parse.c \
	common/parse.h \
	tools/attach.c \
	tools/attach.h
tools_discardctl_LDADD = libctlproto.la libstatstable.la libdclogstderr.la
# attach/detach: the keeper (keeper/), when libnl-genl-3 is there.
tools_discardctl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/keeper
if HAVE_NETLINK
tools_discardctl_LDADD += libkeeper.la $(LIBNL_LIBS)
endif

man1_MANS += tools/discardctl.1
EXTRA_DIST += tools/discardctl.pod
CLEANFILES += tools/discardctl.1

tools/discardctl.1: tools/discardctl.pod
	$(AM_V_GEN)$(MKDIR_P) tools && \
	$(POD2MAN) --section=1 --center="discardcache" --release="$(PACKAGE_VERSION)" \
	  --name=discardctl $< > $@.tmp && mv $@.tmp $@

# The bash completion (commands, options, set's keys, live sockets).
if INSTALL_BASH_COMPLETION
bashcompletion_DATA = bash-completion/discardctl
endif
EXTRA_DIST += bash-completion/discardctl
