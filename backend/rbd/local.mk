# SPDX-License-Identifier: BSD-3-Clause
# backend/rbd/: the Ceph RBD backend (backend/rbd/README.md), part of
# libbackend when librbd's headers are there.  librbd itself is loaded
# at run time by rbd-lib.c, only for backend=rbd:.
rbd_c_sources = \
	backend/rbd/rbd.c \
	backend/rbd/rbd-cluster.c \
	backend/rbd/rbd-holder.c \
	backend/rbd/rbd-lib.c \
	backend/rbd/rbd-space.c \
	backend/rbd/rbd-spec.c \
	backend/rbd/rbd-wait.c
noinst_HEADERS += backend/rbd/rbd-internal.h backend/rbd/rbd-lib.h
EXTRA_DIST += backend/rbd/README.md
if HAVE_RBD
libbackend_la_SOURCES += $(rbd_c_sources) common/json-flat.c
else
EXTRA_DIST += $(rbd_c_sources)
endif
