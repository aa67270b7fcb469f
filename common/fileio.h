/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: small file helpers shared by everything that keeps a
 * file: the state file, the journal, thin mode's meta file, the RBD
 * lock holder's record and the statsfile.  Header-only, as common/ is,
 * so that each layer's library gets its own copy of nothing.
 */
#ifndef DISCARDCACHE_FILEIO_H
#define DISCARDCACHE_FILEIO_H

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Write all of buf at offset, resuming after short writes and EINTR.
 * Returns 0, or -1 with errno set.
 */
static inline int
pwrite_all (int fd, const void *buf, size_t len, uint64_t offset)
{
  const char *p = buf;

  while (len > 0) {
    ssize_t r = pwrite (fd, p, len, offset);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    len -= r;
    offset += r;
  }
  return 0;
}

/* Make a rename or unlink in path's directory durable: fsync the
 * directory.  Returns 0, or -1 with errno set.
 */
static inline int
fsync_dir (const char *path)
{
  char *copy = strdup (path);
  int fd, r, err;

  if (copy == NULL)
    return -1;
  fd = open (dirname (copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  err = errno;
  free (copy);
  if (fd == -1) {
    errno = err;
    return -1;
  }
  r = fsync (fd);
  err = errno;
  close (fd);
  errno = err;
  return r;
}

/* What fileio_replace writes the new content with: fd is the temporary
 * file, empty, open read-write.  0, or -1 with errno set.
 */
typedef int (*fileio_fill_fn) (int fd, void *opaque);

/* fileio_replace's flag: keep the new file open and return its
 * descriptor (a journal that goes on appending to it).
 */
#define FILEIO_KEEP_FD 1
/* ... and: a failed fsync of the directory, once the rename is done, is
 * no failure (*step says it, for a warning): the file is in place.
 */
#define FILEIO_DIR_SOFT 2

/* The step of fileio_replace that fails after path already holds the
 * new content: the rename is done but may not be durable.  With
 * FILEIO_DIR_SOFT it is returned as a success with *step set to it.
 */
#define FILEIO_STEP_DIR "fsync its directory"

/* Replace path atomically: fill writes PATH.tmp (created with mode,
 * never through a symbolic link), which is made durable, renamed over
 * path and the rename made durable by an fsync of the directory, so a
 * crash at any moment leaves path whole, old or new.  Returns 0 (with
 * FILEIO_KEEP_FD, the new file's descriptor), or -1 with errno set and
 * *step naming what failed ("create", "write", "fsync", "close",
 * "rename": path untouched, the temporary file removed; or
 * FILEIO_STEP_DIR).  On success *step is NULL (FILEIO_STEP_DIR under
 * FILEIO_DIR_SOFT).  Reports nothing: the caller names its key.
 */
static inline int
fileio_replace (const char *path, mode_t mode, unsigned flags,
                fileio_fill_fn fill, void *opaque, const char **step)
{
  char *tmp;
  int fd, err;

  *step = "create";
  if (asprintf (&tmp, "%s.tmp", path) == -1) {
    errno = ENOMEM;
    return -1;
  }
  fd = open (tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd == -1) {
    err = errno;
    free (tmp);
    errno = err;
    return -1;
  }
  *step = fill (fd, opaque) == -1 ? "write"
        : fsync (fd) == -1 ? "fsync" : NULL;
  err = errno;
  if (*step != NULL || !(flags & FILEIO_KEEP_FD)) {
    if (close (fd) == -1 && *step == NULL) {
      *step = "close";
      err = errno;
    }
    fd = -1;
  }
  if (*step == NULL && rename (tmp, path) == -1) {
    *step = "rename";
    err = errno;
  }
  if (*step != NULL) {
    if (fd != -1)
      close (fd);
    unlink (tmp);
    free (tmp);
    errno = err;
    return -1;
  }
  free (tmp);
  if (fsync_dir (path) == -1) {
    err = errno;
    *step = FILEIO_STEP_DIR;
    if (!(flags & FILEIO_DIR_SOFT)) {
      if (fd != -1)
        close (fd);
      errno = err;
      return -1;
    }
    errno = err;
  }
  return flags & FILEIO_KEEP_FD ? fd : 0;
}

/* A fileio_fill_fn for the common case: write the buffer fileio_buffer
 * describes.
 */
struct fileio_buffer {
  const void *data;
  size_t len;
};

static inline int
fileio_write_buffer (int fd, void *opaque)
{
  const struct fileio_buffer *b = opaque;

  return pwrite_all (fd, b->data, b->len, 0);
}

/* Format why a file was refused into why[whylen]; returns -1, so that a
 * check can end with "return fileio_fail (why, whylen, ...)".
 */
static inline int fileio_fail (char *why, size_t whylen, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static inline int
fileio_fail (char *why, size_t whylen, const char *fmt, ...)
{
  va_list args;

  va_start (args, fmt);
  vsnprintf (why, whylen, fmt, args);
  va_end (args);
  return -1;
}

#endif /* DISCARDCACHE_FILEIO_H */
