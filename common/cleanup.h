/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: scope-bound cleanup (nbdkit's own macros are not
 * installed with nbdkit-plugin-dev, so these are the small equivalents).
 */
#ifndef DISCARDCACHE_CLEANUP_H
#define DISCARDCACHE_CLEANUP_H

#include <pthread.h>
#include <stdlib.h>

static inline void
cleanup_free (void *ptr)
{
  free (*(void **) ptr);
}
#define CLEANUP_FREE __attribute__ ((cleanup (cleanup_free)))

static inline void
cleanup_unlock (pthread_mutex_t **lock)
{
  pthread_mutex_unlock (*lock);
}
#define DC_CONCAT_(a, b) a##b
#define DC_CONCAT(a, b) DC_CONCAT_ (a, b)
/* Hold mutex m until the end of the enclosing scope. */
#define ACQUIRE_LOCK_FOR_CURRENT_SCOPE(m)                                 \
  pthread_mutex_t *DC_CONCAT (dc_lock_, __LINE__)                         \
    __attribute__ ((cleanup (cleanup_unlock), unused)) = (m);             \
  pthread_mutex_lock (DC_CONCAT (dc_lock_, __LINE__))

#endif /* DISCARDCACHE_CLEANUP_H */
