/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: a parser for the flat JSON objects the control socket
 * sends (one a line; values are numbers, strings, true, false or null),
 * and for reading a few numbers out of a nested answer (a Ceph monitor's
 * `df`): an object or array member is kept as its raw text, which
 * jf_open or jf_next parse in turn.  No allocation: it works in place.
 */
#ifndef DISCARDCACHE_JSON_FLAT_H
#define DISCARDCACHE_JSON_FLAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The statistics object is the largest: every field of the stats table
 * (service/stats-table.h; stats-format.c checks they fit) plus the
 * reply's own members, with room to grow.
 */
#define JF_MAX_MEMBERS 512

enum jf_type {
  JF_NUMBER, JF_STRING, JF_TRUE, JF_FALSE, JF_NULL,
  JF_OBJECT, JF_ARRAY,          /* value: the raw text, len bytes */
};

/* How deep an object or array member may nest. */
#define JF_MAX_DEPTH 32

struct jf_member {
  const char *key;             /* unescaped, NUL-terminated */
  enum jf_type type;
  const char *value;           /* string: unescaped, NUL-terminated;
                                  number: the digits, len bytes;
                                  object, array: the text, len bytes */
  size_t len;
};

struct jf_object {
  size_t n;
  struct jf_member m[JF_MAX_MEMBERS];
};

/* Parse the object in line (NUL-terminated; a trailing newline is
 * allowed).  Strings are unescaped in place, so line is modified and
 * must outlive obj.  Returns 0, or -1 if line is not an object of at
 * most JF_MAX_MEMBERS members (nested at most JF_MAX_DEPTH deep).
 */
extern int jf_parse (char *line, struct jf_object *obj)
  __attribute__ ((nonnull (1, 2)));

/* The member named key, or NULL. */
extern const struct jf_member *jf_find (const struct jf_object *obj,
                                        const char *key)
  __attribute__ ((nonnull (1, 2)));

/* Typed look-ups: true and *out set only if key exists with that type
 * (jf_u64: a non-negative integer that fits; jf_bool: true or false).
 */
extern bool jf_u64 (const struct jf_object *obj, const char *key,
                    uint64_t *out)
  __attribute__ ((nonnull (1, 2, 3)));
extern bool jf_bool (const struct jf_object *obj, const char *key, bool *out)
  __attribute__ ((nonnull (1, 2, 3)));
extern const char *jf_str (const struct jf_object *obj, const char *key)
  __attribute__ ((nonnull (1, 2)));

/* Parse the object member m (JF_OBJECT) into obj, as jf_parse: its text
 * is NUL-terminated in place (over the byte after it, which the parse
 * of its container has read already).  0, or -1 if m is no object.
 */
extern int jf_open (const struct jf_member *m, struct jf_object *obj)
  __attribute__ ((nonnull (1, 2)));

/* The elements of the array member m (JF_ARRAY), one a call: *cursor
 * NULL for the first; *elem set to the next element (with no key; an
 * object or array stays raw, for jf_open).  false at the end or if the
 * array is malformed.
 */
extern bool jf_next (const struct jf_member *m, char **cursor,
                     struct jf_member *elem)
  __attribute__ ((nonnull (1, 2, 3)));

/* The longest escape of a byte, "\u001f", and its NUL. */
#define JF_ESCAPE_SIZE 7

/* Write s to fp as a JSON string, quotes included: the one escaper of
 * the strings we write (the control server's replies, jf_quote).  A
 * quote, a backslash and a newline get their short escapes, the other
 * control bytes and DEL \u00XX; every other byte (UTF-8 included)
 * stands for itself.  Inline so that libctlproto need not link
 * json-flat.c, which libbackend has with RBD: the plugin would get two.
 */
static inline void
jf_write_string (FILE *fp, const char *s)
{
  fputc ('"', fp);
  for (; *s; s++) {
    unsigned char c = *s;

    if (c == '"' || c == '\\')
      fprintf (fp, "\\%c", c);
    else if (c == '\n')
      fputs ("\\n", fp);
    else if (c < 0x20 || c == 0x7f)
      fprintf (fp, "\\u%04x", c);
    else
      fputc (c, fp);
  }
  fputc ('"', fp);
}

/* s as a JSON string, as jf_write_string writes it, into buf (size
 * bytes, NUL terminated).  The length written, or -1 if it does not
 * fit.
 */
extern int jf_quote (char *buf, size_t size, const char *s)
  __attribute__ ((nonnull (1, 3)));

#endif /* DISCARDCACHE_JSON_FLAT_H */
