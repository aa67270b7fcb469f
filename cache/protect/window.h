/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: forwarding windows (window=HH:MM-HH:MM, local time,
 * several allowed): outside them the flusher holds forwarding, except
 * under space pressure, at the memory bound and for explicit flushes
 * (invariant 11: a window only holds discards).  A window whose end is
 * before its start runs past midnight (22:00-06:00); 24:00 is the end
 * of the day.  No window at all: forwarding at any time.
 */
#ifndef DISCARDCACHE_WINDOW_H
#define DISCARDCACHE_WINDOW_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define WINDOW_MAX 16
#define WINDOW_FORMS "HH:MM-HH:MM in local time, several separated by " \
  "commas or in repeated window= keys (at most 16), e.g. 01:00-05:30 " \
  "or 22:00-06:00,12:00-13:00"

struct window_set {
  unsigned n;
  struct {
    uint16_t start, end;       /* minutes since midnight; end may be 1440 */
  } w[WINDOW_MAX];
};

/* Add the windows of value (comma-separated) to set.  0, or -1 with
 * errno EINVAL naming key and the accepted forms, set unchanged.
 */
extern int window_parse (const char *key, const char *value,
                         struct window_set *set)
  __attribute__ ((nonnull (1, 2, 3)));

/* Minutes from minute (since midnight, 0-1439) until a window is open:
 * 0 if one is (or there are none).
 */
extern unsigned window_minutes_until_open (const struct window_set *set,
                                           unsigned minute)
  __attribute__ ((nonnull (1)));

/* At local time *tm: 0 if a window is open, else the milliseconds until
 * the next one opens (to the minute, at least 1).
 */
extern uint64_t window_ms_until_open (const struct window_set *set,
                                      const struct tm *tm)
  __attribute__ ((nonnull (1, 2)));

/* The same now. */
extern uint64_t window_ms_until_open_now (const struct window_set *set)
  __attribute__ ((nonnull (1)));

#endif /* DISCARDCACHE_WINDOW_H */
