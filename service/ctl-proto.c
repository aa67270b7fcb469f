/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the control protocol's pure parts (see ctl-proto.h). */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-proto.h"
#include "json-flat.h"

/* The command and its arguments: set has the most, and one more tells
 * it that there are too many.
 */
#define MAX_TOKENS (2 + CTL_SET_MAX)

static const struct {
  const char *name;
  enum ctl_command command;
} commands[] = {
  { "stats", CTL_STATS }, { "flush", CTL_FLUSH }, { "dump", CTL_DUMP },
  { "pause", CTL_PAUSE }, { "resume", CTL_RESUME }, { "set", CTL_SET },
  { "forget-clean", CTL_FORGET_CLEAN }, { "help", CTL_HELP },
};

/* Only printable ASCII reaches the tokenizer (tabs become spaces), so
 * the replies that echo a token stay plain text.
 */
static int
check_text (char *line, size_t len, char *err, size_t errlen)
{
  for (size_t i = 0; i < len; i++) {
    unsigned char c = line[i];

    if (c == '\t')
      line[i] = ' ';
    else if (c < 0x20 || c > 0x7e) {
      snprintf (err, errlen, "byte 0x%02x at column %zu is not printable "
                "text: expected a line of ASCII text, one of: %s",
                c, i + 1, CTL_COMMANDS);
      return -1;
    }
  }
  return 0;
}

static size_t
tokenize (char *line, char **tok, size_t max)
{
  size_t n = 0;
  char *save = NULL;

  for (char *t = strtok_r (line, " ", &save); t != NULL;
       t = strtok_r (NULL, " ", &save)) {
    if (n == max)
      return max + 1;
    tok[n++] = t;
  }
  return n;
}

static int
parse_flush (char **arg, size_t nargs, struct ctl_request *req,
             char *err, size_t errlen)
{
  for (size_t i = 0; i < nargs; i++) {
    bool *flag = strcmp (arg[i], "--wait") == 0 ? &req->wait
               : strcmp (arg[i], "--progress") == 0 ? &req->progress
               : strcmp (arg[i], "--reserve") == 0 ? &req->reserve : NULL;

    if (flag == NULL || *flag) {
      snprintf (err, errlen, "flush: %s option '%.64s': expected flush "
                "[--wait] [--progress] [--reserve]",
                flag ? "repeated" : "unknown", arg[i]);
      return -1;
    }
    *flag = true;
  }
  if (req->progress)
    req->wait = true;
  return 0;
}

static int
parse_dump (char **arg, size_t nargs, struct ctl_request *req,
            char *err, size_t errlen)
{
  if (nargs > 1 || (nargs == 1 && strcmp (arg[0], "--map") != 0)) {
    snprintf (err, errlen, "dump: unknown option '%.64s': expected dump "
              "[--map]", arg[nargs - 1]);
    return -1;
  }
  req->map = nargs == 1;
  return 0;
}

#define SET_FORMS "expected set KEY=VALUE [KEY=VALUE...], e.g. set delay=10s"

static int
parse_set (char **arg, size_t nargs, struct ctl_request *req,
           char *err, size_t errlen)
{
  if (nargs == 0) {
    snprintf (err, errlen, "set: " SET_FORMS);
    return -1;
  }
  if (nargs > CTL_SET_MAX) {
    snprintf (err, errlen, "set: %zu pairs, at most %d: " SET_FORMS,
              nargs, CTL_SET_MAX);
    return -1;
  }
  for (size_t i = 0; i < nargs; i++) {
    char *eq = strchr (arg[i], '=');

    if (eq == NULL || eq == arg[i]) {
      snprintf (err, errlen, "set: '%.64s' is not KEY=VALUE: " SET_FORMS,
                arg[i]);
      return -1;
    }
    *eq = '\0';
    for (size_t j = 0; j < i; j++)
      if (strcmp (req->keys[j], arg[i]) == 0) {
        snprintf (err, errlen, "set: %.64s given twice: give each key once",
                  arg[i]);
        return -1;
      }
    req->keys[i] = arg[i];
    req->values[i] = eq + 1;
  }
  req->nset = nargs;
  return 0;
}

int
ctl_parse_request (char *line, size_t len, struct ctl_request *req,
                   char *err, size_t errlen)
{
  char *tok[MAX_TOKENS];
  size_t n;

  memset (req, 0, sizeof *req);
  if (len > 0 && line[len - 1] == '\r')
    len--;
  line[len] = '\0';
  if (check_text (line, len, err, errlen) == -1)
    return -1;
  n = tokenize (line, tok, MAX_TOKENS);
  if (n == 0 || n > MAX_TOKENS) {
    snprintf (err, errlen, "%s request: expected one of: %s",
              n == 0 ? "empty" : "too long a", CTL_COMMANDS);
    return -1;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp (tok[0], commands[i].name) != 0)
      continue;
    req->command = commands[i].command;
    if (req->command == CTL_FLUSH)
      return parse_flush (tok + 1, n - 1, req, err, errlen);
    if (req->command == CTL_SET)
      return parse_set (tok + 1, n - 1, req, err, errlen);
    if (req->command == CTL_DUMP)
      return parse_dump (tok + 1, n - 1, req, err, errlen);
    if (n > 1) {
      snprintf (err, errlen, "%s takes no arguments (got '%.64s')",
                tok[0], tok[1]);
      return -1;
    }
    return 0;
  }
  snprintf (err, errlen, "unknown command '%.64s': expected one of: %s",
            tok[0], CTL_COMMANDS);
  return -1;
}

/* Drop the line taken last, so the buffer starts with unread bytes. */
static void
compact (struct ctl_linebuf *lb)
{
  if (lb->consumed == 0)
    return;
  memmove (lb->buf, lb->buf + lb->consumed, lb->len - lb->consumed);
  lb->len -= lb->consumed;
  lb->consumed = 0;
}

char *
ctl_linebuf_space (struct ctl_linebuf *lb, size_t *room)
{
  compact (lb);
  *room = sizeof lb->buf - lb->len;
  return lb->buf + lb->len;
}

void
ctl_linebuf_added (struct ctl_linebuf *lb, size_t n)
{
  lb->len += n;
}

int
ctl_linebuf_next (struct ctl_linebuf *lb, char **line, size_t *len)
{
  char *nl;

  compact (lb);
  nl = memchr (lb->buf, '\n', lb->len);
  if (nl == NULL)
    return lb->len == sizeof lb->buf ? -1 : 0;
  *nl = '\0';
  *line = lb->buf;
  *len = nl - lb->buf;
  lb->consumed = *len + 1;
  return 1;
}

const char *const ctl_flush_keys[CTL_FLUSH_NKEYS] = {
#define CTL_FLUSH_KEY_NAME(name, replies) #name,
  CTL_FLUSH_KEYS (CTL_FLUSH_KEY_NAME)
#undef CTL_FLUSH_KEY_NAME
};

void
ctl_flush_write (FILE *fp, enum ctl_flush_reply reply,
                 const uint64_t v[CTL_FLUSH_NKEYS])
{
  static const unsigned carried_by[CTL_FLUSH_NKEYS] = {
#define CTL_FLUSH_KEY_REPLIES(name, replies) replies,
    CTL_FLUSH_KEYS (CTL_FLUSH_KEY_REPLIES)
#undef CTL_FLUSH_KEY_REPLIES
  };

  fputs (reply == CTL_FLUSH_PROGRESS ? "{\"progress\":true"
         : reply == CTL_FLUSH_DONE ? "{\"ok\":true,\"flush\":\"done\""
         : "{\"ok\":true,\"flush\":\"started\"", fp);
  for (size_t k = 0; k < CTL_FLUSH_NKEYS; k++)
    if (carried_by[k] & reply)
      fprintf (fp, ",\"%s\":%" PRIu64, ctl_flush_keys[k], v[k]);
  fputs ("}\n", fp);
}

void
ctl_json_error (FILE *fp, const char *msg)
{
  fputs ("{\"ok\":false,\"error\":", fp);
  jf_write_string (fp, msg);
  fputs ("}\n", fp);
}

int
ctl_default_dir (char *buf, size_t n)
{
  const char *xdg = getenv ("XDG_RUNTIME_DIR");
  int r;

  /* A relative XDG_RUNTIME_DIR is invalid by the specification. */
  if (xdg && xdg[0] == '/')
    r = snprintf (buf, n, "%s/discardcache", xdg);
  else
    r = snprintf (buf, n, "/run/discardcache");
  return r < 0 || (size_t) r >= n ? -1 : 0;
}
