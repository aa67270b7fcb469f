/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: dc_error/dc_debug for programs that are not nbdkit plugins. */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>

#include "log.h"
#include "log-stderr.h"

/* Set once, before any thread starts, by a program that daemonises. */
static bool use_syslog;

void
dc_log_to_syslog (void)
{
  openlog (program_invocation_short_name, LOG_PID, LOG_DAEMON);
  use_syslog = true;
}

/* fmt may use %m, so errno must survive the prefix. */
static void vlog (int priority, const char *prefix, const char *fmt,
                  va_list args)
  __attribute__ ((format (printf, 3, 0)));

static void
vlog (int priority, const char *prefix, const char *fmt, va_list args)
{
  int saved_errno = errno;

  if (use_syslog) {
    vsyslog (priority, fmt, args);
    return;
  }
  fprintf (stderr, "%s: %s", program_invocation_short_name, prefix);
  errno = saved_errno;
  vfprintf (stderr, fmt, args);
  fputc ('\n', stderr);
}

void
dc_error (const char *fmt, ...)
{
  int saved_errno = errno;
  va_list args;

  va_start (args, fmt);
  vlog (LOG_ERR, "", fmt, args);
  va_end (args);
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
  va_start (args, fmt);
  vlog (LOG_DEBUG, "debug: ", fmt, args);
  va_end (args);
  errno = saved_errno;
}
