/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: value parsers (see parse.h). */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "arith.h"
#include "cleanup.h"
#include "log.h"
#include "parse.h"

#define NS_PER_S UINT64_C (1000000000)

/* Parse leading decimal digits into *n; returns the rest of the string,
 * or NULL on no digits or overflow.  strtoull is not used because it
 * accepts signs and white space.
 */
static const char *
parse_digits (const char *s, uint64_t *n)
{
  uint64_t v = 0;

  if (!isdigit ((unsigned char) *s))
    return NULL;
  for (; isdigit ((unsigned char) *s); s++) {
    if (__builtin_mul_overflow (v, 10, &v) ||
        __builtin_add_overflow (v, (uint64_t) (*s - '0'), &v))
      return NULL;
  }
  *n = v;
  return s;
}

int
parse_invalid (const char *key, const char *value, const char *forms)
{
  dc_error (PARSE_INVALID_FMT, key, value, forms);
  errno = EINVAL;
  return -1;
}

#define SCALED_COUNT_FORMS "a count with an optional suffix k, M or G (powers of 1024), e.g. 1000 or 1M"

/* Digits with an optional suffix b, k, M, G, T, P or E (any case), at
 * most INT64_MAX.  False if value is not of that form.
 */
static bool
scan_size (const char *value, uint64_t *out)
{
  static const char suffixes[] = "bkmgtpe";
  uint64_t n, mult = 1;
  const char *rest = parse_digits (value, &n);
  const char *p;

  if (rest == NULL)
    return false;
  if (*rest != '\0') {
    if (rest[1] != '\0' || (p = strchr (suffixes, tolower ((unsigned char) *rest))) == NULL)
      return false;
    for (ptrdiff_t i = 0; i < p - suffixes; i++)
      mult *= 1024;
  }
  if (__builtin_mul_overflow (n, mult, &n) || n > INT64_MAX)
    return false;
  *out = n;
  return true;
}

int
parse_size (const char *key, const char *value, uint64_t *out)
{
  return scan_size (value, out) ? 0 : parse_invalid (key, value, PARSE_SIZE_FORMS);
}

int
parse_scaled_count (const char *key, const char *value, uint64_t *out)
{
  return scan_size (value, out) ? 0
                                : parse_invalid (key, value, SCALED_COUNT_FORMS);
}

/* A duration in nanoseconds, in nbdkit_parse_delay's forms (nbdkit >=
 * 1.40; Debian 12 ships 1.32): digits, an optional fraction, an
 * optional unit.  The fraction is rounded up to the nanosecond (digits
 * past the ninth add at most 1 ns), so that a duration above 0 never
 * reads as 0.  False if value is not of that form or exceeds INT64_MAX
 * ns (292 years).
 */
static bool
scan_duration_ns (const char *value, uint64_t *out)
{
  static const struct { const char *suffix; uint64_t ns; } units[] = {
    { "", NS_PER_S }, { "s", NS_PER_S }, { "ms", 1000000 }, { "us", 1000 },
    { "\xc2\xb5s", 1000 }, { "\xce\xbcs", 1000 }, { "ns", 1 },
    { "m", 60 * NS_PER_S }, { "h", 3600 * NS_PER_S },
  };
  uint64_t n, frac = 0, scale = 1, ns, rem;
  bool finer = false;                   /* nonzero digits past the 9th */
  const char *rest = parse_digits (value, &n);

  if (rest == NULL)
    return false;
  if (*rest == '.') {
    if (!isdigit ((unsigned char) *++rest))
      return false;
    for (; isdigit ((unsigned char) *rest); rest++) {
      if (scale < NS_PER_S) {
        frac = frac * 10 + (uint64_t) (*rest - '0');
        scale *= 10;
      }
      else
        finer |= *rest != '0';
    }
  }
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp (rest, units[i].suffix) != 0)
      continue;
    /* frac/scale of the unit, split so that no product passes 2^64:
     * frac < scale <= 10^9.
     */
    rem = frac * (units[i].ns % scale);
    ns = frac * (units[i].ns / scale) + rem / scale + (rem % scale || finer);
    if (__builtin_mul_overflow (n, units[i].ns, &n) ||
        __builtin_add_overflow (n, ns, &n) || n > INT64_MAX)
      return false;
    *out = n;
    return true;
  }
  return false;
}

int
parse_duration_ms (const char *key, const char *value, uint64_t *out)
{
  uint64_t ns;

  if (!scan_duration_ns (value, &ns))
    return parse_invalid (key, value, PARSE_DURATION_FORMS);
  *out = ns / 1000000 + (ns % 1000000 != 0);
  return 0;
}

int
parse_bool (const char *key, const char *value, bool *out)
{
  static const char *const truths[] = { "1", "true", "yes", "on" };
  static const char *const falsehoods[] = { "0", "false", "no", "off" };

  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp (value, truths[i]) == 0) {
      *out = true;
      return 0;
    }
    if (strcasecmp (value, falsehoods[i]) == 0) {
      *out = false;
      return 0;
    }
  }
  return parse_invalid (key, value, "a boolean: true/false, yes/no, on/off or 1/0");
}

int
parse_count (const char *key, const char *value, uint64_t max, uint64_t *out)
{
  uint64_t n;
  const char *rest = parse_digits (value, &n);
  char forms[64];

  if (rest == NULL || *rest != '\0' || n > max) {
    snprintf (forms, sizeof forms, "a whole number from 0 to %" PRIu64, max);
    return parse_invalid (key, value, forms);
  }
  *out = n;
  return 0;
}

/* An absolute path: nbdkit changes directory to / when it daemonises,
 * so a relative path is resolved against the directory it started in.
 */
int
parse_path (const char *key, const char *value, const char *forms, char **out)
{
  CLEANUP_FREE char *cwd = NULL;
  char *path;

  if (*value == '\0') {
    dc_error ("%s: empty value: expected %s", key, forms);
    errno = EINVAL;
    return -1;
  }
  if (value[0] == '/')
    path = strdup (value);
  else if ((cwd = getcwd (NULL, 0)) == NULL) {
    dc_error ("%s=%s: cannot resolve a relative path: getcwd: %m", key, value);
    return -1;
  }
  else if (asprintf (&path, "%s/%s", cwd, value) == -1)
    path = NULL;
  if (path == NULL) {
    dc_error ("%s: out of memory", key);
    errno = ENOMEM;
    return -1;
  }
  free (*out);
  *out = path;
  return 0;
}

int
parse_auto_size (const char *key, const char *value, const char *forms,
                 uint64_t min, uint64_t max, bool power_of_2, uint64_t *out)
{
  uint64_t n;

  if (strcmp (value, "auto") == 0) {
    *out = 0;
    return 0;
  }
  if (!scan_size (value, &n) || n < min || n > max ||
      (power_of_2 && !is_power_of_2 (n)))
    return parse_invalid (key, value, forms);
  *out = n;
  return 0;
}
