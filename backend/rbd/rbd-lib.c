/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: librados and librbd loaded on demand (rbd-lib.h).
 *
 * Linked, they cost every server: some 20 more shared libraries loaded
 * at start, 17 MiB more resident, and a package dependency on Ceph for
 * a user serving a local disk.  Loaded here, only backend=rbd: pays.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "log.h"
#include "rbd-lib.h"

/* Open soname, or say in why what to install (name: the library, pkg:
 * its Debian package).  Never closed: lib's pointers must stay valid
 * for the process, and Ceph's libraries are not made to be unloaded.
 */
static void *
open_lib (const char *soname, const char *name, const char *pkg, char *why,
          size_t len)
{
  void *h = dlopen (soname, RTLD_NOW | RTLD_LOCAL);

  if (h == NULL)
    snprintf (why, len, "the RBD backend needs %s (Debian: apt-get install "
              "%s): %s", name, pkg, dlerror ());
  return h;
}

/* Look name up in handle h into *fn, or say in why what is missing. */
static int
find (void *h, const char *name, const char *lib, const char *pkg,
      void **fn, char *why, size_t len)
{
  dlerror ();
  *fn = dlsym (h, name);
  if (*fn == NULL) {
    const char *e = dlerror ();

    snprintf (why, len, "the RBD backend needs a %s that has %s (Debian: "
              "apt-get install %s): %s", lib, name, pkg,
              e ? e : "a null symbol");
    return -1;
  }
  return 0;
}

int
rbd_lib_load (struct rbd_lib *lib, const char *rados_so, const char *rbd_so,
              char *why, size_t len)
{
  void *rados = open_lib (rados_so, "librados", "librados2", why, len);
  void *rbd = rados ? open_lib (rbd_so, "librbd", "librbd1", why, len) : NULL;
  void *fn;

  if (rbd == NULL) {
    errno = ELIBACC;
    return -1;
  }
  /* dlsym's void * to the member's function pointer type: POSIX
   * requires the conversion to work.
   */
#define RBD_LIB_FIND(h, lname, pkg, name) \
  if (find (h, #name, lname, pkg, &fn, why, len) == -1) { \
    errno = ELIBACC; \
    return -1; \
  } \
  lib->name = (__typeof__ (lib->name)) fn;
#define RBD_LIB_FIND_RADOS(name) \
  RBD_LIB_FIND (rados, "librados", "librados2", name)
#define RBD_LIB_FIND_RBD(name) RBD_LIB_FIND (rbd, "librbd", "librbd1", name)
  RBD_LIB_RADOS_FUNCTIONS (RBD_LIB_FIND_RADOS)
  RBD_LIB_RBD_FUNCTIONS (RBD_LIB_FIND_RBD)
#undef RBD_LIB_FIND_RBD
#undef RBD_LIB_FIND_RADOS
#undef RBD_LIB_FIND
  return 0;
}

/* One table for the process, filled once: the libraries it points into
 * are loaded for the whole process anyway, and every rbd: backend (one
 * per server, and again after the fork hooks) uses the same ones.
 */
static pthread_once_t process_once = PTHREAD_ONCE_INIT;
static struct rbd_lib process_lib;
static int process_err;
static char process_why[512];

static void
load_process_lib (void)
{
  if (rbd_lib_load (&process_lib, RBD_LIB_RADOS_SONAME, RBD_LIB_RBD_SONAME,
                    process_why, sizeof process_why) == -1)
    process_err = errno;
}

const struct rbd_lib *
rbd_lib_get (const char *spec)
{
  pthread_once (&process_once, load_process_lib);
  if (process_err) {
    errno = process_err;
    dc_error ("backend=%s: %s", spec, process_why);
    return NULL;
  }
  return &process_lib;
}
