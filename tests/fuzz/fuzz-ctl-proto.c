/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: libFuzzer target for the control protocol's request
 * side (service/ctl-proto.c): the bytes arrive in chunks (their size from
 * the first byte), go through the line assembler and the request parser
 * as the server's client threads do; every error message is quoted as
 * the server sends it and read back by discardctl's parser
 * (common/json-flat.c), which must return it unchanged.
 */
#include <config.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-proto.h"
#include "json-flat.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { fprintf (stderr, "fuzz: %s\n", #cond); abort (); } } while (0)

/* The reply of an error message of at most REPLY_MAX_ERR bytes fits:
 * each byte's escape, plus the object around it.
 */
#define REPLY_MAX_ERR 512
#define REPLY_SIZE (REPLY_MAX_ERR * (JF_ESCAPE_SIZE - 1) + 64)

static void
check_error_reply (const char *err)
{
  /* A fixed buffer, not open_memstream: its allocation and clearing
   * per error line was a tenth of the target's time.
   */
  static char buf[REPLY_SIZE];
  FILE *fp = fmemopen (buf, sizeof buf, "w");
  struct jf_object obj;
  long len;

  CHECK (fp != NULL && strlen (err) < REPLY_MAX_ERR);
  ctl_json_error (fp, err);
  len = ftell (fp);
  CHECK (fclose (fp) == 0);
  CHECK (len > 0 && (size_t) len < sizeof buf);
  buf[len] = '\0';
  CHECK (buf[len - 1] == '\n' && memchr (buf, '\n', len) == buf + len - 1);
  CHECK (jf_parse (buf, &obj) == 0);
  CHECK (jf_str (&obj, "error") != NULL && strcmp (jf_str (&obj, "error"), err) == 0);
}

static void
check_request (char *line, size_t len)
{
  struct ctl_request req;
  char err[REPLY_MAX_ERR];

  err[0] = '\0';
  if (ctl_parse_request (line, len, &req, err, sizeof err) == -1) {
    CHECK (err[0] != '\0');
    check_error_reply (err);
    return;
  }
  CHECK (req.command <= CTL_HELP);
  CHECK (!req.progress || req.wait);
  if (req.command == CTL_SET) {
    CHECK (req.nset >= 1 && req.nset <= CTL_SET_MAX);
    for (size_t i = 0; i < req.nset; i++) {
      CHECK (req.keys[i] && *req.keys[i] && !strchr (req.keys[i], ' ') &&
             !strchr (req.keys[i], '=') && req.values[i] &&
             !strchr (req.values[i], ' '));
      for (size_t j = 0; j < i; j++)
        CHECK (strcmp (req.keys[i], req.keys[j]) != 0);
    }
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static struct ctl_linebuf lb;
  size_t chunk = size ? data[0] % 97 + 1 : 1;
  size_t pos = 0;

  memset (&lb, 0, sizeof lb);
  while (pos < size) {
    size_t room, n;
    char *space = ctl_linebuf_space (&lb, &room), *line;
    int r;

    n = size - pos < chunk ? size - pos : chunk;
    n = n < room ? n : room;
    memcpy (space, data + pos, n);
    ctl_linebuf_added (&lb, n);
    pos += n;
    while ((r = ctl_linebuf_next (&lb, &line, &n)) == 1) {
      CHECK (n <= CTL_MAX_LINE && line[n] == '\0');
      check_request (line, n);
    }
    if (r == -1)
      return 0;               /* the server closes here */
    CHECK (room > 0);
  }
  return 0;
}
