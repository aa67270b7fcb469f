/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the flat JSON object parser (see json-flat.h). */
#include <config.h>

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json-flat.h"

static char *
skip_space (char *p)
{
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

static int
hex4 (const char *p, unsigned *out)
{
  unsigned v = 0;

  for (int i = 0; i < 4; i++) {
    char c = p[i];

    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else
      return -1;
  }
  *out = v;
  return 0;
}

static char *
put_utf8 (char *w, unsigned cp)
{
  if (cp < 0x80)
    *w++ = cp;
  else if (cp < 0x800) {
    *w++ = 0xc0 | cp >> 6;
    *w++ = 0x80 | (cp & 0x3f);
  }
  else if (cp < 0x10000) {
    *w++ = 0xe0 | cp >> 12;
    *w++ = 0x80 | ((cp >> 6) & 0x3f);
    *w++ = 0x80 | (cp & 0x3f);
  }
  else {
    *w++ = 0xf0 | cp >> 18;
    *w++ = 0x80 | ((cp >> 12) & 0x3f);
    *w++ = 0x80 | ((cp >> 6) & 0x3f);
    *w++ = 0x80 | (cp & 0x3f);
  }
  return w;
}

/* \uXXXX at p (after the backslash-u), a surrogate pair joined.
 * Returns the end of the escape, or NULL.  The UTF-8 is never longer
 * than the escape, so it can be written in place.
 */
static char *
unescape_u (char *p, char **w)
{
  unsigned cp, lo;

  if (hex4 (p, &cp) == -1 || cp == 0)
    return NULL;
  p += 4;
  if (cp >= 0xd800 && cp < 0xdc00) {
    if (p[0] != '\\' || p[1] != 'u' || hex4 (p + 2, &lo) == -1 ||
        lo < 0xdc00 || lo >= 0xe000)
      return NULL;
    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    p += 6;
  }
  else if (cp >= 0xdc00 && cp < 0xe000)
    return NULL;
  *w = put_utf8 (*w, cp);
  return p;
}

/* The string starting after its opening quote at p: unescaped in place
 * and NUL-terminated.  Returns the position after the closing quote.
 */
static char *
parse_string (char *p, const char **out)
{
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  char *w = p;

  *out = p;
  for (;;) {
    unsigned char c = *p++;
    const char *esc;

    if (c == '"')
      break;
    if (c < 0x20)
      return NULL;
    if (c != '\\') {
      *w++ = c;
      continue;
    }
    c = *p++;
    if (c == 'u') {
      if ((p = unescape_u (p, &w)) == NULL)
        return NULL;
    }
    else if (c != '\0' && (esc = strchr (from, c)) != NULL)
      *w++ = to[esc - from];
    else
      return NULL;
  }
  *w = '\0';
  return p;
}

/* A JSON number; its text stays where it is (p, *len bytes). */
static char *
parse_number (char *p, size_t *len)
{
  char *start = p;

  if (*p == '-')
    p++;
  if (*p < '0' || *p > '9')
    return NULL;
  while ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' ||
         *p == '+' || *p == '-')
    p++;
  *len = p - start;
  return p;
}

/* The string starting after its opening quote at p, left as it is.
 * Returns the position after the closing quote, or NULL.
 */
static char *
skip_string (char *p)
{
  for (;;) {
    unsigned char c = *p++;

    if (c == '"')
      return p;
    if (c < 0x20 || (c == '\\' && *p++ == '\0'))
      return NULL;
  }
}

/* The object or array at p, left as it is: returns the position after
 * its closing bracket, or NULL.  Only the brackets and the strings are
 * checked here; jf_open and jf_next check the rest when they parse it.
 */
static char *
skip_nested (char *p)
{
  char closing[JF_MAX_DEPTH];
  size_t depth = 0;

  do {
    char c = *p++;

    if (c == '{' || c == '[') {
      if (depth == JF_MAX_DEPTH)
        return NULL;
      closing[depth++] = c == '{' ? '}' : ']';
    }
    else if (c == '}' || c == ']') {
      if (closing[--depth] != c)
        return NULL;
    }
    else if (c == '"') {
      if ((p = skip_string (p)) == NULL)
        return NULL;
    }
    else if (c == '\0')
      return NULL;
  } while (depth > 0);
  return p;
}

static char *
parse_value (char *p, struct jf_member *m)
{
  static const struct { const char *word; enum jf_type type; } words[] = {
    { "true", JF_TRUE }, { "false", JF_FALSE }, { "null", JF_NULL },
  };

  m->value = p;
  if (*p == '{' || *p == '[') {
    char *end = skip_nested (p);

    m->type = *p == '{' ? JF_OBJECT : JF_ARRAY;
    m->len = end ? (size_t) (end - p) : 0;
    return end;
  }
  if (*p == '"') {
    m->type = JF_STRING;
    p = parse_string (p + 1, &m->value);
    m->len = p ? strlen (m->value) : 0;
    return p;
  }
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
    size_t n = strlen (words[i].word);

    if (strncmp (p, words[i].word, n) == 0) {
      m->type = words[i].type;
      m->len = n;
      return p + n;
    }
  }
  m->type = JF_NUMBER;
  return parse_number (p, &m->len);
}

int
jf_parse (char *line, struct jf_object *obj)
{
  char *p = skip_space (line);

  obj->n = 0;
  if (*p++ != '{')
    return -1;
  p = skip_space (p);
  if (*p == '}')
    return *skip_space (p + 1) == '\0' ? 0 : -1;
  for (;;) {
    struct jf_member *m = &obj->m[obj->n];

    if (obj->n == JF_MAX_MEMBERS || *p != '"' ||
        (p = parse_string (p + 1, &m->key)) == NULL)
      return -1;
    p = skip_space (p);
    if (*p++ != ':')
      return -1;
    if ((p = parse_value (skip_space (p), m)) == NULL)
      return -1;
    obj->n++;
    p = skip_space (p);
    if (*p == '}')
      return *skip_space (p + 1) == '\0' ? 0 : -1;
    if (*p++ != ',')
      return -1;
    p = skip_space (p);
  }
}

const struct jf_member *
jf_find (const struct jf_object *obj, const char *key)
{
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp (obj->m[i].key, key) == 0)
      return &obj->m[i];
  return NULL;
}

bool
jf_u64 (const struct jf_object *obj, const char *key, uint64_t *out)
{
  const struct jf_member *m = jf_find (obj, key);
  uint64_t v = 0;

  if (m == NULL || m->type != JF_NUMBER || m->len == 0)
    return false;
  for (size_t i = 0; i < m->len; i++) {
    unsigned d = m->value[i] - '0';

    if (d > 9 || __builtin_mul_overflow (v, 10, &v) ||
        __builtin_add_overflow (v, d, &v))
      return false;
  }
  *out = v;
  return true;
}

bool
jf_bool (const struct jf_object *obj, const char *key, bool *out)
{
  const struct jf_member *m = jf_find (obj, key);

  if (m == NULL || (m->type != JF_TRUE && m->type != JF_FALSE))
    return false;
  *out = m->type == JF_TRUE;
  return true;
}

const char *
jf_str (const struct jf_object *obj, const char *key)
{
  const struct jf_member *m = jf_find (obj, key);

  return m && m->type == JF_STRING ? m->value : NULL;
}

int
jf_open (const struct jf_member *m, struct jf_object *obj)
{
  char *text = (char *) m->value;

  if (m->type != JF_OBJECT)
    return -1;
  text[m->len] = '\0';
  return jf_parse (text, obj);
}

bool
jf_next (const struct jf_member *m, char **cursor, struct jf_member *elem)
{
  char *closing, *p;

  if (m->type != JF_ARRAY)
    return false;
  closing = (char *) m->value + m->len - 1;
  p = skip_space (*cursor ? *cursor : (char *) m->value + 1);
  if (p >= closing)
    return false;
  elem->key = "";
  p = parse_value (p, elem);
  if (p == NULL || p > closing)
    return false;
  p = skip_space (p);
  if (*p == ',')
    p++;
  else if (p != closing)
    return false;
  *cursor = p;
  return true;
}

/* Through a stream on buf, so that the escaping is jf_write_string's:
 * the position counts what did not fit too.
 */
int
jf_quote (char *buf, size_t size, const char *s)
{
  FILE *fp = fmemopen (buf, size, "w");
  long n;

  if (fp == NULL)
    return -1;
  jf_write_string (fp, s);
  n = ftell (fp);
  if (fclose (fp) == EOF || n < 0 || (size_t) n >= size || n > INT_MAX)
    return -1;
  buf[n] = '\0';
  return (int) n;
}
