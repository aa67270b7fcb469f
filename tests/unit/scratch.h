/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: scratch directories for the unit tests that need
 * files or sockets.
 */
#ifndef DISCARDCACHE_SCRATCH_H
#define DISCARDCACHE_SCRATCH_H

#include <stddef.h>

/* Make a fresh directory $TMPDIR/NAME-XXXXXX ($TMPDIR defaults to /tmp)
 * and store its path in dir (n bytes).  Aborts the test if it cannot.
 */
extern void scratch_make (char *dir, size_t n, const char *name);

/* Remove dir and everything below it. */
extern void scratch_remove (const char *dir);

#endif /* DISCARDCACHE_SCRATCH_H */
