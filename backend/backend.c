/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: backend_open picks the implementation for a spec, and
 * the calls every backend answers through its ops.  What the
 * implementations share is in impl.c, so that they never call back
 * into this file.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arith.h"
#include "backend.h"
#include "internal.h"
#include "log.h"

#define ACCEPTED_FORMS \
  "backend=PATH of a regular file or block device, " \
  "an NBD URI such as nbd+unix:///?socket=/path, " \
  "or rbd:POOL/IMAGE"

/* The URI schemes libnbd's nbd_connect_uri understands.  A file whose
 * name starts with one of them is reached as ./nbd:...
 */
static const char *const uri_schemes[] = {
  "nbd:", "nbds:", "nbd+unix:", "nbds+unix:", "nbd+vsock:", "nbds+vsock:",
};

bool
backend_spec_is_uri (const char *spec)
{
  size_t i;

  for (i = 0; i < sizeof uri_schemes / sizeof uri_schemes[0]; ++i)
    if (strncmp (spec, uri_schemes[i], strlen (uri_schemes[i])) == 0)
      return true;
  return false;
}

bool
backend_spec_is_rbd (const char *spec)
{
  return strncmp (spec, "rbd:", 4) == 0;
}

/* Report a path that is neither a regular file nor a block device. */
static struct backend *
wrong_type (const char *path, mode_t mode)
{
  errno = S_ISDIR (mode) ? EISDIR : EINVAL;
  dc_error ("backend=%s: %s: expected %s", path,
            S_ISDIR (mode) ? "is a directory" : "not a regular file or block device",
            ACCEPTED_FORMS);
  return NULL;
}

/* Whether serving it read-only would help: the path can be read. */
static bool
readable (const char *path)
{
  int saved_errno = errno;
  bool r = faccessat (AT_FDCWD, path, R_OK, AT_EACCESS) == 0;

  errno = saved_errno;
  return r;
}

static struct backend *
open_failed (const char *path, bool read_only)
{
  int err = errno;
  char why[512];
  struct stat st;

  if (!read_only && (errno == EACCES || errno == EROFS || errno == EPERM) &&
      readable (path))
    dc_error ("backend=%s: cannot open for writing: %m "
              "(serve it read-only: readonly, -r)", path);
  else if (errno == EBUSY && stat (path, &st) == 0 && S_ISBLK (st.st_mode)) {
    backend_explain_busy (&st, why, sizeof why);
    dc_error ("backend=%s: the block device is in use: %s", path, why);
  }
  else
    dc_error ("backend=%s: %m", path);
  errno = err;
  return NULL;
}

/* Open with O_NONBLOCK so that a fifo swapped in after the stat cannot
 * hang the open, then check the type again on what was opened.  A block
 * device opened for writing is opened exclusively (O_EXCL), so a mounted
 * device is refused rather than corrupted.
 */
static struct backend *
open_path (const char *path, bool read_only)
{
  struct stat st;
  int flags = (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  int fd;

  if (stat (path, &st) == -1)
    return open_failed (path, read_only);
  if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode))
    return wrong_type (path, st.st_mode);
  if (S_ISBLK (st.st_mode) && !read_only)
    flags |= O_EXCL;

  fd = open (path, flags);
  if (fd == -1)
    return open_failed (path, read_only);
  if (fstat (fd, &st) == -1 || fcntl (fd, F_SETFL, 0) == -1) {
    dc_error ("backend=%s: %m", path);
    close (fd);
    return NULL;
  }
  if (S_ISBLK (st.st_mode))
    return backend_blkdev_open (path, fd, read_only);
  if (S_ISREG (st.st_mode))
    return backend_file_open (path, fd, read_only);
  close (fd);
  return wrong_type (path, st.st_mode);
}

#ifndef HAVE_RBD
struct backend *
backend_rbd_open (const char *spec, const struct backend_options *o)
{
  (void) o;
  errno = ENOTSUP;
  dc_error ("backend=%s: this build has no RBD backend (librbd was not "
            "found when it was configured: install librbd-dev and "
            "librados-dev, then configure --with-rbd)", spec);
  return NULL;
}
#endif

struct backend *
backend_open_with (const char *spec, const struct backend_options *o)
{
  struct backend *b;

  if (spec == NULL || *spec == '\0') {
    errno = EINVAL;
    dc_error ("backend: missing; expected %s", ACCEPTED_FORMS);
    return NULL;
  }
  if (backend_spec_is_uri (spec))
    b = backend_nbd_open (spec, o->read_only);
  else if (backend_spec_is_rbd (spec))
    b = backend_rbd_open (spec, o);
  else
    b = open_path (spec, o->read_only);
  return b;
}

struct backend *
backend_open (const char *spec, bool read_only)
{
  struct backend_options o = { .read_only = read_only };

  return backend_open_with (spec, &o);
}

int
backend_lock (struct backend *b)
{
  return b->ops->lock ? b->ops->lock (b) : 0;
}

static int
add_allocated (uint64_t offset, uint64_t length, uint32_t type, void *opaque)
{
  uint64_t *allocated = opaque;

  if (!(type & BACKEND_EXTENT_HOLE))
    *allocated += length;
  return 0;
}

int
backend_range_allocated (struct backend *b, uint64_t offset, uint64_t length,
                         uint64_t *allocated)
{
  *allocated = 0;
  if (!b->limits.can_extents) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return backend_extents (b, offset, length, add_allocated, allocated);
}

uint64_t
backend_size (const struct backend *b)
{
  return b->size;
}

const struct backend_limits *
backend_limits (const struct backend *b)
{
  return &b->limits;
}

const struct backend_identity *
backend_identity (const struct backend *b)
{
  return &b->identity;
}

int
backend_extents (struct backend *b, uint64_t offset, uint64_t length,
                 backend_extent_fn fn, void *opaque)
{
  if (b->ops->extents == NULL) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return b->ops->extents (b, offset, length, fn, opaque);
}

bool
backend_has_free_space (const struct backend *b)
{
  return b->ops->free_space != NULL;
}

int
backend_free_space (struct backend *b, uint64_t *free, uint64_t *total)
{
  if (b->ops->free_space == NULL) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return b->ops->free_space (b, free, total);
}

int
backend_start (struct backend *b)
{
  return b->ops->start ? b->ops->start (b) : 0;
}

bool
backend_flush_covers (struct backend *b, int fd)
{
  return b->ops->flush_covers && b->ops->flush_covers (b, fd);
}

void
backend_flush_start (struct backend *b)
{
  if (b->ops->flush_start)
    b->ops->flush_start (b);
}

int
backend_before_fork (struct backend *b)
{
  return b->ops->before_fork ? b->ops->before_fork (b) : 0;
}

int
backend_after_fork (struct backend *b)
{
  return b->ops->after_fork ? b->ops->after_fork (b) : 0;
}

int
backend_allocated (struct backend *b, uint64_t *bytes)
{
  if (b->ops->allocated == NULL) {
    errno = ENOTSUP;
    return -1;
  }
  return b->ops->allocated (b, bytes);
}

int
backend_readings (struct backend *b, struct backend_readings *r)
{
  if (b->ops->readings == NULL) {
    errno = ENOTSUP;
    return -1;
  }
  return b->ops->readings (b, r);
}

void
backend_close (struct backend *b)
{
  if (b)
    b->ops->close (b);
}

void
backend_saved_identity (const struct backend_identity *id,
                        struct backend_identity *out)
{
  *out = *id;
  if (id->stable[0] == '\0')
    return;
  out->dev = 0;
  out->ino = 0;
  snprintf (out->name, sizeof out->name, "%s", id->stable);
}
