/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: doubling growth of a heap array, shared by the arrays
 * that grow one element or one record at a time (zero lists, the state
 * encoder, the thin journal buffer and unmap list).
 */
#ifndef DISCARDCACHE_GROW_H
#define DISCARDCACHE_GROW_H

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

/* Reallocate ptr, an array of *cap elements of elem_size bytes, to twice
 * as many elements (initial if *cap is 0).  Returns the new array and
 * updates *cap, or returns NULL with errno ENOMEM and changes nothing
 * (ptr stays valid).  Reports nothing: the caller knows what it was for.
 */
static inline void *
grow_array (void *ptr, size_t *cap, size_t elem_size, size_t initial)
{
  size_t n = *cap ? *cap : initial, bytes;
  void *p;

  /* realloc of 0 bytes may free ptr and return NULL. */
  assert (initial > 0 && elem_size > 0);
  if ((*cap && __builtin_mul_overflow (n, 2, &n)) ||
      __builtin_mul_overflow (n, elem_size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  p = realloc (ptr, bytes);
  if (p == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  *cap = n;
  return p;
}

#endif /* DISCARDCACHE_GROW_H */
