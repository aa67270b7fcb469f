/* discardcache: dc_error/dc_debug for programs that are not nbdkit plugins. */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

void
dc_error (const char *fmt, ...)
{
  int saved_errno = errno;
  va_list args;

  fprintf (stderr, "%s: ", program_invocation_short_name);
  va_start (args, fmt);
  vfprintf (stderr, fmt, args);
  va_end (args);
  fputc ('\n', stderr);
  errno = saved_errno;
}

void
dc_debug (const char *fmt, ...)
{
  int saved_errno = errno;
  const char *env = getenv ("DISCARDCACHE_DEBUG");
  va_list args;

  if (env == NULL || *env == '\0' || *env == '0')
    return;
  fprintf (stderr, "%s: debug: ", program_invocation_short_name);
  va_start (args, fmt);
  vfprintf (stderr, fmt, args);
  va_end (args);
  fputc ('\n', stderr);
  errno = saved_errno;
}
