/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: strdup for optional strings, for copying settings. */
#ifndef DISCARDCACHE_STRDUP_NULL_H
#define DISCARDCACHE_STRDUP_NULL_H

#include <stdlib.h>
#include <string.h>

/* *dst = a copy of src, or NULL when src is NULL.  0, or -1 when out
 * of memory (then *dst is NULL).
 */
static inline int
strdup_null (const char *src, char **dst)
{
  *dst = NULL;
  if (src && (*dst = strdup (src)) == NULL)
    return -1;
  return 0;
}

#endif /* DISCARDCACHE_STRDUP_NULL_H */
