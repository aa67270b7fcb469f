/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: forwarding windows (see window.h). */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "log.h"
#include "parse.h"
#include "verify.h"
#include "window.h"

#define DAY_MINUTES 1440

/* "HH:MM" at *p, 00:00 to 23:59 (24:00 when end): minutes, or -1. */
static int
parse_clock (const char **p, bool end)
{
  const char *s = *p;
  int h, m;

  if (!isdigit ((unsigned char) s[0]) || !isdigit ((unsigned char) s[1]) ||
      s[2] != ':' ||
      !isdigit ((unsigned char) s[3]) || !isdigit ((unsigned char) s[4]))
    return -1;
  h = (s[0] - '0') * 10 + (s[1] - '0');
  m = (s[3] - '0') * 10 + (s[4] - '0');
  if (m > 59 || h > 24 || (h == 24 && (m != 0 || !end)))
    return -1;
  *p = s + 5;
  return h * 60 + m;
}

int
window_parse (const char *key, const char *value, struct window_set *set)
{
  struct window_set copy = *set;
  const char *p = value;

  for (;;) {
    int start = parse_clock (&p, false), end;

    if (start == -1 || *p++ != '-' || (end = parse_clock (&p, true)) == -1)
      goto bad;
    if (start == end % DAY_MINUTES) {
      dc_error ("%s=%s: a window that ends when it starts is empty: "
                "expected %s", key, value, WINDOW_FORMS);
      errno = EINVAL;
      return -1;
    }
    if (copy.n == WINDOW_MAX) {
      dc_error ("%s=%s: more than %d windows: expected %s", key, value,
                WINDOW_MAX, WINDOW_FORMS);
      errno = EINVAL;
      return -1;
    }
    copy.w[copy.n].start = start;
    copy.w[copy.n].end = end;
    copy.n++;
    if (*p == '\0')
      break;
    if (*p++ != ',')
      goto bad;
  }
  *set = copy;
  return 0;

 bad:
  return parse_invalid (key, value, WINDOW_FORMS);
}

/* Minutes from minute until window i opens: 0 inside it. */
static unsigned
until_one (const struct window_set *set, unsigned i, unsigned minute)
{
  unsigned start = set->w[i].start, end = set->w[i].end;
  bool inside;

  /* window_parse's forms: an empty window (start == end) would read as
   * the whole day, and forwarding would never be held.
   */
  VERIFY3U (start, <, DAY_MINUTES);
  VERIFY3U (end, <=, DAY_MINUTES);
  VERIFY3U (start, !=, end % DAY_MINUTES);
  inside = start < end ? minute >= start && minute < end
                            : minute >= start || minute < end;

  if (inside)
    return 0;
  return (start + DAY_MINUTES - minute) % DAY_MINUTES;
}

unsigned
window_minutes_until_open (const struct window_set *set, unsigned minute)
{
  unsigned best = DAY_MINUTES;

  VERIFY3U (set->n, <=, WINDOW_MAX);
  if (set->n == 0)
    return 0;
  for (unsigned i = 0; i < set->n; i++) {
    unsigned u = until_one (set, i, minute % DAY_MINUTES);

    if (u < best)
      best = u;
  }
  return best;
}

uint64_t
window_ms_until_open (const struct window_set *set, const struct tm *tm)
{
  unsigned minute = tm->tm_hour * 60 + tm->tm_min;
  unsigned u = window_minutes_until_open (set, minute);
  int sec = tm->tm_sec > 59 ? 59 : tm->tm_sec;    /* a leap second */

  if (u == 0)
    return 0;
  return (uint64_t) u * 60000 - (uint64_t) sec * 1000;
}

uint64_t
window_ms_until_open_now (const struct window_set *set)
{
  time_t t;
  struct tm tm;

  if (set->n == 0)
    return 0;
  t = time (NULL);
  if (localtime_r (&t, &tm) == NULL)
    return 0;                   /* no local time: never hold */
  return window_ms_until_open (set, &tm);
}
