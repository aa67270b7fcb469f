/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: librados and librbd, loaded with dlopen when an rbd:
 * backend is opened, so that a server of any other backend neither
 * loads Ceph's libraries nor depends on them (docs/design-notes.md,
 * "RBD backend").  The headers still give the types and constants.
 */
#ifndef DISCARDCACHE_BACKEND_RBD_LIB_H
#define DISCARDCACHE_BACKEND_RBD_LIB_H

#include <stddef.h>

#include <rados/librados.h>
#include <rbd/librbd.h>

/* Every library function the backend calls, F (name) each. */
#define RBD_LIB_RADOS_FUNCTIONS(F) \
  F (rados_buffer_free) F (rados_conf_get) F (rados_conf_parse_env) \
  F (rados_conf_read_file) F (rados_conf_set) F (rados_connect) \
  F (rados_create) F (rados_ioctx_create) F (rados_ioctx_destroy) \
  F (rados_ioctx_get_id) F (rados_ioctx_set_namespace) \
  F (rados_mon_command) F (rados_set_pool_full_try) F (rados_shutdown) \
  F (rados_blocklist_add) F (rados_getaddrs) F (rados_get_instance_id)
#define RBD_LIB_RBD_FUNCTIONS(F) \
  F (rbd_aio_create_completion) F (rbd_aio_discard) F (rbd_aio_flush) \
  F (rbd_aio_get_return_value) F (rbd_aio_read) F (rbd_aio_release) \
  F (rbd_aio_write) F (rbd_aio_write_zeroes) \
  F (rbd_close) F (rbd_diff_iterate2) F (rbd_get_features) \
  F (rbd_get_flags) F (rbd_get_size) F (rbd_get_stripe_count) \
  F (rbd_lock_acquire) F (rbd_lock_break) F (rbd_lock_get_owners) \
  F (rbd_metadata_get) F (rbd_metadata_set) F (rbd_metadata_remove) \
  F (rbd_lock_get_owners_cleanup) F (rbd_namespace_exists) F (rbd_open) \
  F (rbd_open_read_only) F (rbd_stat) F (rbd_watchers_list) \
  F (rbd_watchers_list_cleanup)

/* The functions, each member named and typed as the header declares it:
 * lib->rbd_open (...) is a call of librbd's rbd_open.
 */
struct rbd_lib {
#define RBD_LIB_MEMBER(name) __typeof__ (name) *name;
  RBD_LIB_RADOS_FUNCTIONS (RBD_LIB_MEMBER)
  RBD_LIB_RBD_FUNCTIONS (RBD_LIB_MEMBER)
#undef RBD_LIB_MEMBER
};

/* The libraries' sonames, those the headers' ABI is for. */
#define RBD_LIB_RADOS_SONAME "librados.so.2"
#define RBD_LIB_RBD_SONAME "librbd.so.1"

/* Load the shared libraries rados_so and rbd_so (never unloaded) and
 * fill lib with their functions.  0, or -1 with errno ELIBACC and, in
 * why (len bytes), which library is missing, the Debian package to
 * install and dlerror's text; not reported (the caller names its key).
 */
extern int rbd_lib_load (struct rbd_lib *lib, const char *rados_so,
                         const char *rbd_so, char *why, size_t len)
  __attribute__ ((nonnull (1, 2, 3, 4)));

/* The process's table, loaded from the sonames above at the first call.
 * NULL with errno set, reported naming backend=spec.
 */
extern const struct rbd_lib *rbd_lib_get (const char *spec)
  __attribute__ ((nonnull (1)));

#endif /* DISCARDCACHE_BACKEND_RBD_LIB_H */
