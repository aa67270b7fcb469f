/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: small file helpers shared by the state file and the
 * thin-mode meta file.
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
