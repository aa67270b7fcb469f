/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: dc_error/dc_debug inside nbdkit go to nbdkit's own log. */
#include <config.h>

#include <errno.h>
#include <stdarg.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "log.h"

/* nbdkit documents that it keeps errno; log.h promises it on its own. */
void
dc_error (const char *fmt, ...)
{
  int saved_errno = errno;
  va_list args;

  va_start (args, fmt);
  nbdkit_verror (fmt, args);
  va_end (args);
  errno = saved_errno;
}

void
dc_debug (const char *fmt, ...)
{
  va_list args;

  va_start (args, fmt);
  nbdkit_vdebug (fmt, args);
  va_end (args);
}
