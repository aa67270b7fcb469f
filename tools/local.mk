# discardctl: the control socket's client, installed in sbin with its
# man page (discardctl.8 from discardctl.pod, as the plugin's).
sbin_PROGRAMS += tools/discardctl
tools_discardctl_SOURCES = \
	tools/discardctl.c \
	tools/ctl-client.c \
	tools/ctl-client.h \
	tools/human.c \
	tools/human.h \
	tools/json-flat.c \
	tools/json-flat.h \
	tools/progress.c \
	tools/progress.h \
	tools/stats-format.c \
	tools/stats-format.h \
	common/parse.c \
	common/parse.h
tools_discardctl_LDADD = libctlproto.la libdclogstderr.la

man8_MANS += tools/discardctl.8
EXTRA_DIST += tools/discardctl.pod
CLEANFILES += tools/discardctl.8

tools/discardctl.8: tools/discardctl.pod
	$(AM_V_GEN)$(MKDIR_P) tools && \
	$(POD2MAN) --section=8 --center="discardcache" --release="$(PACKAGE_VERSION)" \
	  --name=discardctl $< > $@.tmp && mv $@.tmp $@
