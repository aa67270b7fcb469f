/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the stderr logger's one switch (common/log-stderr.c).
 * A daemon has no stderr once it detaches, so it sends its messages to
 * syslog instead, as nbdkit does after forking.
 */
#ifndef DISCARDCACHE_LOG_STDERR_H
#define DISCARDCACHE_LOG_STDERR_H

/* From now on dc_error/dc_debug go to syslog (facility daemon). */
extern void dc_log_to_syslog (void);

#endif /* DISCARDCACHE_LOG_STDERR_H */
