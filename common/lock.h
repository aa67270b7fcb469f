/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: clang's thread-safety annotations (-Wthread-safety), so
 * that lock rules written in comments are checked by the compiler.
 * With any other compiler they expand to nothing.
 *
 * A capability is what a lock guards, named in the annotations:
 *   GUARDED_BY (c)      on a field: read or written only holding c
 *   PT_GUARDED_BY (c)   on a pointer field: what it points to, likewise
 *   REQUIRES (c)        on a function: called holding c, returns holding c
 *   ACQUIRE (c)         takes c;  RELEASE (c): gives it back
 *   TRY_ACQUIRE (r, c)  takes c when it returns r
 *   EXCLUDES (c)        called without c (it takes it itself)
 *   NO_THREAD_SAFETY_ANALYSIS  the few wrappers the analysis cannot see
 *                       through (the pthread calls themselves; a lock's
 *                       take and give back come from DC_LOCK_WRAPPERS)
 * configure adds -Wthread-safety when the compiler is clang, and the
 * clang build of scripts/test-all makes every finding an error.
 */
#ifndef DISCARDCACHE_LOCK_H
#define DISCARDCACHE_LOCK_H

#include <pthread.h>

#if defined __clang__
#define DC_TSA(x) __attribute__ ((x))
#else
#define DC_TSA(x)
#endif

#define CAPABILITY(name) DC_TSA (capability (name))
#define GUARDED_BY(c) DC_TSA (guarded_by (c))
#define PT_GUARDED_BY(c) DC_TSA (pt_guarded_by (c))
#define REQUIRES(...) DC_TSA (requires_capability (__VA_ARGS__))
#define ACQUIRE(...) DC_TSA (acquire_capability (__VA_ARGS__))
#define RELEASE(...) DC_TSA (release_capability (__VA_ARGS__))
#define TRY_ACQUIRE(...) DC_TSA (try_acquire_capability (__VA_ARGS__))
#define EXCLUDES(...) DC_TSA (locks_excluded (__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS DC_TSA (no_thread_safety_analysis)

/* The type of a capability that exists only for the analysis: in C,
 * clang (14 here) cannot name a sibling field in GUARDED_BY, so a lock
 * that lives in a struct is stood for by one extern object of this type,
 * declared and never defined (no code refers to it), and the lock's
 * wrappers acquire and release that.
 */
struct CAPABILITY ("mutex") dc_capability;

/* Define name_acquire (type *) and name_release (type *), which take and
 * give back the pthread mutex in that type's member field, annotated as
 * acquiring and releasing cap: the one place a lock's wrappers are
 * written and the analysis is told to trust them.  At file scope,
 * without a semicolon:
 *   DC_LOCK_WRAPPERS (engine_lock, struct engine, lock, engine_lock)
 */
#define DC_LOCK_WRAPPERS(name, type, field, cap)                        \
  static inline void                                                    \
  name##_acquire (type *dc_owner)                                       \
    ACQUIRE (cap) NO_THREAD_SAFETY_ANALYSIS                             \
  {                                                                     \
    pthread_mutex_lock (&dc_owner->field);                              \
  }                                                                     \
                                                                        \
  static inline void                                                    \
  name##_release (type *dc_owner)                                       \
    RELEASE (cap) NO_THREAD_SAFETY_ANALYSIS                             \
  {                                                                     \
    pthread_mutex_unlock (&dc_owner->field);                            \
  }

#endif /* DISCARDCACHE_LOCK_H */
