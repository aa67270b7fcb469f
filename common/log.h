/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: error and debug reporting shared by every component.
 *
 * The functions are implemented once per front-end and bound at link
 * time: nbd-plugin/log-nbdkit.c forwards to nbdkit_error/nbdkit_debug,
 * common/log-stderr.c prints to stderr (FUSE front-end, tools, tests).
 * Library code reports an error once, then returns -1 with errno set.
 */
#ifndef DISCARDCACHE_LOG_H
#define DISCARDCACHE_LOG_H

/* Report an error to the user; errno is preserved across the call. */
extern void dc_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* Report a debug message (nbdkit -v, or DISCARDCACHE_DEBUG=1 elsewhere). */
extern void dc_debug (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

#endif /* DISCARDCACHE_LOG_H */
