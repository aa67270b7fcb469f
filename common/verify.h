/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: executable contracts, after OpenZFS's VERIFY/ASSERT.
 * The invariants the code cites (docs/design-notes.md) are checked at
 * the boundaries where a bug would break them: the extent map's
 * mutators, the forward path, journal replay, thin's allocator, the
 * backends' ranges.  A failed check is a bug in discardcache, never bad
 * input: input from a client, a file or a server is refused with an
 * errno, as before; a check catches what no input should reach.
 *
 *   VERIFY (cond)             always compiled in: cheap checks, O(1)
 *   VERIFY3U (a, op, b)       the same, printing both operands (uint64_t)
 *   VERIFY3S (a, op, b)       the same, signed (int64_t)
 *   DEBUG_VERIFY (cond)       only in test builds (--enable-debug-checks,
 *   DEBUG_VERIFY3U (a, op, b) implied by --enable-sanitizers and
 *   DEBUG_VERIFY3S (a, op, b) --enable-tsan): the expensive ones, O(log n)
 *                             or more, or on every request
 *   DEBUG_VERIFY_HELD (m)     test builds: the pthread mutex m is held
 *                             (by someone: a trylock that succeeds means
 *                             nobody held it), for *_locked functions
 *
 * A failure prints "FILE:LINE: FUNCTION: VERIFY(cond) failed" (for the
 * 3U/3S forms, "VERIFY3U(a <= b) failed (5 <= 3)") through dc_error
 * (common/log.h: nbdkit's log in the plugin, stderr or syslog
 * elsewhere) and calls abort(): a process that broke an invariant must
 * not go on sending discards.  In a build without debug checks the
 * DEBUG_ forms compile to nothing and do not evaluate their arguments,
 * though the compiler still parses them, so they cannot rot.  Keep side
 * effects out of every check, VERIFY's too: deleting a check must leave
 * the code as it was (that is how tests/unit/test-verify.c's cases were
 * shown able to fail).  DC_HAVE_DEBUG_CHECKS is 1 in a build with the
 * DEBUG_ forms.  Count the checks with
 *   grep -rEo '\b(DEBUG_)?VERIFY(3U|3S|_HELD)? \(' --include='*.[ch]' \
 *     backend cache volume | wc -l
 */
#ifndef DISCARDCACHE_VERIFY_H
#define DISCARDCACHE_VERIFY_H

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

/* Report a failed check and abort.  Not called directly: the macros
 * below pass the location and the text of the expression.
 */
static inline void __attribute__ ((noreturn, cold, format (printf, 4, 5)))
dc_verify_failed (const char *file, int line, const char *func,
                  const char *fmt, ...)
{
  char msg[512];
  va_list args;

  va_start (args, fmt);
  vsnprintf (msg, sizeof msg, fmt, args);
  va_end (args);
  dc_error ("%s:%d: %s: %s", file, line, func, msg);
  abort ();
}

/* The text of each expression is taken here, at the outer macro, so
 * that it reads as written (macros in it unexpanded).
 */
#define DC_VERIFY_(cond, text)                                          \
  do {                                                                  \
    if (__builtin_expect (!(cond), 0))                                  \
      dc_verify_failed (__FILE__, __LINE__, __func__,                   \
                        "VERIFY(%s) failed", text);                     \
  } while (0)
#define VERIFY(cond) DC_VERIFY_ (cond, #cond)

/* Each operand is evaluated once, converted to the type the suffix
 * names (as OpenZFS's VERIFY3U does).
 */
#define DC_VERIFY3_(a, op, b, ta, tb, type, pri, name)                  \
  do {                                                                  \
    const type dc_verify_a_ = (type) (a);                               \
    const type dc_verify_b_ = (type) (b);                               \
    if (__builtin_expect (!(dc_verify_a_ op dc_verify_b_), 0))          \
      dc_verify_failed (__FILE__, __LINE__, __func__,                   \
                        name "(%s " #op " %s) failed (%" pri " " #op    \
                        " %" pri ")", ta, tb, dc_verify_a_,             \
                        dc_verify_b_);                                  \
  } while (0)
#define VERIFY3U(a, op, b) \
  DC_VERIFY3_ (a, op, b, #a, #b, uint64_t, PRIu64, "VERIFY3U")
#define VERIFY3S(a, op, b) \
  DC_VERIFY3_ (a, op, b, #a, #b, int64_t, PRId64, "VERIFY3S")

/* A trylock that succeeds proves nobody held the mutex: give it back
 * and fail.  (Held by another thread is not caught; held by this one
 * is the common case and passes.)
 */
#define DC_VERIFY_HELD_(m, text)                                        \
  do {                                                                  \
    pthread_mutex_t *dc_verify_m_ = (m);                                \
    if (pthread_mutex_trylock (dc_verify_m_) == 0) {                    \
      pthread_mutex_unlock (dc_verify_m_);                              \
      dc_verify_failed (__FILE__, __LINE__, __func__,                   \
                        "VERIFY_HELD(%s) failed (the lock is free)",    \
                        text);                                          \
    }                                                                   \
  } while (0)

#ifdef DC_DEBUG_CHECKS
#define DEBUG_VERIFY(cond) DC_VERIFY_ (cond, #cond)
#define DEBUG_VERIFY3U(a, op, b) \
  DC_VERIFY3_ (a, op, b, #a, #b, uint64_t, PRIu64, "VERIFY3U")
#define DEBUG_VERIFY3S(a, op, b) \
  DC_VERIFY3_ (a, op, b, #a, #b, int64_t, PRId64, "VERIFY3S")
#define DEBUG_VERIFY_HELD(m) DC_VERIFY_HELD_ (m, #m)
#else
/* sizeof: parsed and type-checked, never evaluated. */
#define DEBUG_VERIFY(cond) ((void) sizeof (!(cond)))
#define DEBUG_VERIFY3U(a, op, b) ((void) sizeof ((a) op (b)))
#define DEBUG_VERIFY3S(a, op, b) ((void) sizeof ((a) op (b)))
#define DEBUG_VERIFY_HELD(m) ((void) sizeof (m))
#endif

/* Whether the DEBUG_ checks are compiled in (for tests). */
#ifdef DC_DEBUG_CHECKS
#define DC_HAVE_DEBUG_CHECKS 1
#else
#define DC_HAVE_DEBUG_CHECKS 0
#endif

#endif /* DISCARDCACHE_VERIFY_H */
