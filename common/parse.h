/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: parsers for the values users type after key=.  Shared by
 * the nbdkit plugin and the FUSE front-end so both accept the same forms.
 * Each reports a clear error naming key and the accepted forms, and
 * returns -1 with errno = EINVAL, leaving *out unchanged.
 */
#ifndef DISCARDCACHE_PARSE_H
#define DISCARDCACHE_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/* The accepted forms, as the error messages name them. */
#define PARSE_SIZE_FORMS "a size in bytes with an optional suffix k, M, G, T, P or E (powers of 1024), e.g. 4096 or 64k"
#define PARSE_DURATION_SYNTAX "a number, a fraction allowed, with an optional suffix h, m, s, ms, us or ns (seconds if none), e.g. 1.5s, 250ms or 30"
#define PARSE_DURATION_FORMS "a duration: " PARSE_DURATION_SYNTAX

/* The one wording of a refused value, with key, value and forms as its
 * three strings: for a caller that must put it in a reply, not the log.
 */
#define PARSE_INVALID_FMT "%s=%s: invalid value: expected %s"

/* Report "KEY=VALUE: invalid value: expected FORMS" and return -1 with
 * errno = EINVAL: for a caller whose own checks (a range, a keyword)
 * come after one of the parsers below, so every refusal reads alike.
 */
extern int parse_invalid (const char *key, const char *value,
                          const char *forms);

/* A size in nbdkit_parse_size forms: digits with an optional suffix
 * b, k/K, M, G, T, P, E (powers of 1024).  Rejects signs and overflow.
 */
extern int parse_size (const char *key, const char *value, uint64_t *out);

/* A count in the same forms (max-extents=1M): the message speaks of a
 * count, not of bytes.
 */
extern int parse_scaled_count (const char *key, const char *value,
                               uint64_t *out);

/* A duration in nbdkit_parse_delay's forms (nbdkit >= 1.40): digits
 * with an optional fraction and an optional suffix h, m, s (the
 * default), ms, us (or the micro sign) or ns: 1.5, 1.2s, 250ms, 1.2us.
 * Stored in whole milliseconds, rounded up: a duration above 0 is at
 * least 1 ms.  Refuses signs, exponents, a bare suffix and more than
 * 292 years.
 */
extern int parse_duration_ms (const char *key, const char *value,
                              uint64_t *out);

/* A boolean: 1/0, true/false, yes/no, on/off (any case). */
extern int parse_bool (const char *key, const char *value, bool *out);

/* An unsigned count up to max, digits only. */
extern int parse_count (const char *key, const char *value, uint64_t max,
                        uint64_t *out);

/* A path, made absolute against the current directory (nbdkit and
 * discardfuse change to / when they daemonise).  forms names what is
 * expected, for the message about an empty value.  *out is replaced
 * (the old string freed).
 */
extern int parse_path (const char *key, const char *value, const char *forms,
                       char **out);

/* auto (stored as 0), or a size in parse_size's forms from min to max
 * (and a power of two with power_of_2): granularity=, max-discard=,
 * slot=.  forms is the whole accepted form for the message, e.g. "auto
 * or a power of two such as 4096 or 64k".
 */
extern int parse_auto_size (const char *key, const char *value,
                            const char *forms, uint64_t min, uint64_t max,
                            bool power_of_2, uint64_t *out);

#endif /* DISCARDCACHE_PARSE_H */
