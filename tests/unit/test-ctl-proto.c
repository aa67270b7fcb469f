/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the control protocol's pure parts (service/ctl-proto.c)
 * and discardctl's reply parser (common/json-flat.c): request lines, the
 * line assembler, JSON quoting (the server's and jf_quote, alike), and
 * the flat-object parser reading back what the server writes.
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl-proto.h"
#include "json-flat.h"

static int
parse (const char *text, struct ctl_request *req, char *err, size_t errlen)
{
  static char line[CTL_MAX_LINE + 1];
  size_t len = strlen (text);

  memcpy (line, text, len + 1);
  return ctl_parse_request (line, len, req, err, errlen);
}

static void
test_requests (void **state)
{
  struct ctl_request r;
  char err[512];

  assert_int_equal (parse ("stats", &r, err, sizeof err), 0);
  assert_int_equal (r.command, CTL_STATS);
  assert_int_equal (parse ("  dump \r", &r, err, sizeof err), 0);
  assert_int_equal (r.command, CTL_DUMP);
  assert_int_equal (parse ("flush", &r, err, sizeof err), 0);
  assert_true (r.command == CTL_FLUSH && !r.wait && !r.progress);
  assert_int_equal (parse ("flush\t--progress", &r, err, sizeof err), 0);
  assert_true (r.wait && r.progress);
  assert_int_equal (parse ("flush --wait --progress", &r, err, sizeof err), 0);
  assert_true (r.wait && r.progress);
  assert_int_equal (parse ("set delay=10s", &r, err, sizeof err), 0);
  assert_int_equal (r.command, CTL_SET);
  assert_int_equal (r.nset, 1);
  assert_string_equal (r.keys[0], "delay");
  assert_string_equal (r.values[0], "10s");
  assert_int_equal (parse ("set rate=", &r, err, sizeof err), 0);
  assert_string_equal (r.values[0], "");
  /* Several pairs, in the order given; a value may hold '='. */
  assert_int_equal (parse ("set delay=5s  idle=1s\tx=a=b", &r, err,
                           sizeof err), 0);
  assert_int_equal (r.nset, 3);
  assert_string_equal (r.keys[0], "delay");
  assert_string_equal (r.values[0], "5s");
  assert_string_equal (r.keys[1], "idle");
  assert_string_equal (r.values[1], "1s");
  assert_string_equal (r.keys[2], "x");
  assert_string_equal (r.values[2], "a=b");
  assert_int_equal (parse ("set 1=1 2=2 3=3 4=4 5=5 6=6 7=7 8=8 9=9 10=10 "
                           "11=11 12=12 13=13 14=14 15=15 16=16", &r, err,
                           sizeof err), 0);
  assert_int_equal (r.nset, CTL_SET_MAX);
  assert_string_equal (r.keys[15], "16");
  assert_int_equal (parse ("pause", &r, err, sizeof err), 0);
  assert_int_equal (r.command, CTL_PAUSE);
  assert_int_equal (parse ("resume", &r, err, sizeof err), 0);
  assert_int_equal (r.command, CTL_RESUME);
  assert_int_equal (parse ("help", &r, err, sizeof err), 0);
  assert_int_equal (r.command, CTL_HELP);
  assert_int_equal (parse ("forget-clean", &r, err, sizeof err), 0);
  assert_int_equal (r.command, CTL_FORGET_CLEAN);
}

static void
test_bad_requests (void **state)
{
  static const struct { const char *line, *says; } bad[] = {
    { "", "empty request" },
    { "   ", "empty request" },
    { "frobnicate", "unknown command 'frobnicate'" },
    { "STATS", "unknown command" },
    { "stats now", "takes no arguments" },
    { "forget-clean --all", "takes no arguments" },
    { "flush --now", "unknown option '--now'" },
    { "flush --wait --wait", "repeated option" },
    { "set", "KEY=VALUE" },
    { "set delay", "KEY=VALUE" },
    { "set =5", "KEY=VALUE" },
    { "set a=1 b", "'b' is not KEY=VALUE" },
    { "set a=1 =2", "'=2' is not KEY=VALUE" },
    { "set a=1 b=2 a=3", "a given twice" },
    { "set a=1 a=1", "a given twice" },
    { "set 1=1 2=2 3=3 4=4 5=5 6=6 7=7 8=8 9=9 10=10 11=11 12=12 13=13 "
      "14=14 15=15 16=16 17=17", "17 pairs, at most 16" },
    { "set 1=1 2=2 3=3 4=4 5=5 6=6 7=7 8=8 9=9 10=10 11=11 12=12 13=13 "
      "14=14 15=15 16=16 17=17 18=18", "too long a request" },
    { "dump a b c d e", "unknown option" },
    { "flush --wait --progress --wait", "repeated option" },
    { "stats\x01", "byte 0x01 at column 6" },
    { "st\xc3\xa4ts", "byte 0xc3 at column 3" },
  };
  struct ctl_request r;
  char err[512];

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    assert_int_equal (parse (bad[i].line, &r, err, sizeof err), -1);
    if (strstr (err, bad[i].says) == NULL)
      fail_msg ("'%s': '%s' does not say '%s'", bad[i].line, err, bad[i].says);
  }
  /* A NUL inside the line is not the end of it. */
  {
    char line[16] = "stats\0dump";

    assert_int_equal (ctl_parse_request (line, 10, &r, err, sizeof err), -1);
    assert_non_null (strstr (err, "0x00"));
  }
  /* Messages fit any buffer, truncated. */
  assert_int_equal (parse ("nosuchcommand", &r, err, 8), -1);
  assert_int_equal (strlen (err), 7);
}

static void
feed (struct ctl_linebuf *lb, const char *data, size_t len)
{
  size_t room;
  char *p = ctl_linebuf_space (lb, &room);

  assert_true (len <= room);
  memcpy (p, data, len);
  ctl_linebuf_added (lb, len);
}

static void
test_linebuf (void **state)
{
  static struct ctl_linebuf lb;
  static char big[CTL_MAX_LINE + 2];
  char *line;
  size_t len;

  feed (&lb, "sta", 3);
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), 0);
  feed (&lb, "ts\ndump\nfl", 10);
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), 1);
  assert_string_equal (line, "stats");
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), 1);
  assert_string_equal (line, "dump");
  assert_int_equal (len, 4);
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), 0);
  feed (&lb, "ush\n", 4);
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), 1);
  assert_string_equal (line, "flush");
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), 0);

  /* The longest line fits exactly, newline included ... */
  memset (big, 'x', CTL_MAX_LINE);
  big[CTL_MAX_LINE] = '\n';
  feed (&lb, big, CTL_MAX_LINE + 1);
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), 1);
  assert_int_equal (len, CTL_MAX_LINE);
  /* ... one more byte is too long. */
  feed (&lb, big, CTL_MAX_LINE);
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), 0);
  feed (&lb, "x", 1);
  assert_int_equal (ctl_linebuf_next (&lb, &line, &len), -1);
}

/* What the server quotes, discardctl's parser reads back unchanged. */
static void
test_json_roundtrip (void **state)
{
  static const char *const strings[] = {
    "plain", "quote \" and \\ backslash", "tab\there", "new\nline",
    "\x01\x1f\x7f", "caf\xc3\xa9", "",
  };

  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream (&buf, &len);
    struct jf_object obj;
    bool ok = true;

    ctl_json_error (fp, strings[i]);
    fclose (fp);
    assert_int_equal (buf[len - 1], '\n');
    assert_null (memchr (buf, '\t', len));
    assert_int_equal (jf_parse (buf, &obj), 0);
    assert_true (jf_bool (&obj, "ok", &ok));
    assert_false (ok);
    assert_string_equal (jf_str (&obj, "error"), strings[i]);
    free (buf);
  }
}

/* s as the control server quotes it (jf_write_string), NUL-terminated. */
static void
ctl_quote (char *buf, size_t size, const char *s)
{
  FILE *fp = fmemopen (buf, size, "w");
  long len;

  assert_non_null (fp);
  jf_write_string (fp, s);
  len = ftell (fp);
  assert_int_equal (fclose (fp), 0);
  assert_true (len > 0 && (size_t) len < size);
  buf[len] = '\0';
}

/* The server's replies and jf_quote escape every byte alike (jf_quote
 * goes through jf_write_string): each alone, and all in one string;
 * and jf_quote refuses a buffer one byte short.
 */
static void
test_json_quote_alike (void **state)
{
  char all[256], ctl[256 * JF_ESCAPE_SIZE], jf[sizeof ctl];

  for (int c = 1; c <= 255; c++) {
    char s[2] = { (char) c, '\0' };

    ctl_quote (ctl, sizeof ctl, s);
    assert_int_not_equal (jf_quote (jf, sizeof jf, s), -1);
    if (strcmp (ctl, jf) != 0)
      fail_msg ("byte 0x%02x: jf_write_string %s, jf_quote %s", c, ctl, jf);
    all[c - 1] = (char) c;
  }
  all[255] = '\0';
  ctl_quote (ctl, sizeof ctl, all);
  assert_int_not_equal (jf_quote (jf, sizeof jf, all), -1);
  assert_string_equal (ctl, jf);
  assert_int_equal (jf_quote (jf, 7, "a\nb"), 6);
  assert_string_equal (jf, "\"a\\nb\"");
  assert_int_equal (jf_quote (jf, 6, "a\nb"), -1);
}

/* A flush's replies as the protocol spells them: a key misspelt in the
 * table (CTL_FLUSH_KEYS) fails here, and each number reads back by the
 * table's keys, as discardctl reads it.
 */
static void
test_flush_replies (void **state)
{
  static const struct {
    enum ctl_flush_reply reply;
    const char *line;
  } replies[] = {
    { CTL_FLUSH_STARTED,
      "{\"ok\":true,\"flush\":\"started\",\"total_bytes\":3}\n" },
    { CTL_FLUSH_PROGRESS,
      "{\"progress\":true,\"forwarded\":1,\"forwarded_bytes\":2,"
      "\"total_bytes\":3,\"elapsed_ms\":4}\n" },
    { CTL_FLUSH_DONE,
      "{\"ok\":true,\"flush\":\"done\",\"forwarded\":1,"
      "\"forwarded_bytes\":2,\"total_bytes\":3,\"elapsed_ms\":4,"
      "\"pending_extents\":5,\"pending_bytes\":6,\"subgranule_bytes\":7}\n" },
  };
  uint64_t v[CTL_FLUSH_NKEYS];

  for (size_t k = 0; k < CTL_FLUSH_NKEYS; k++)
    v[k] = k + 1;
  for (size_t i = 0; i < sizeof replies / sizeof replies[0]; i++) {
    char *buf = NULL;
    size_t len = 0, found = 0;
    FILE *fp = open_memstream (&buf, &len);
    struct jf_object obj;

    assert_non_null (fp);
    ctl_flush_write (fp, replies[i].reply, v);
    assert_int_equal (fclose (fp), 0);
    assert_string_equal (buf, replies[i].line);
    assert_int_equal (jf_parse (buf, &obj), 0);
    for (size_t k = 0; k < CTL_FLUSH_NKEYS; k++) {
      uint64_t got;

      if (jf_u64 (&obj, ctl_flush_keys[k], &got)) {
        assert_int_equal (got, v[k]);
        found++;
      }
    }
    assert_int_equal (found, obj.n - (replies[i].reply == CTL_FLUSH_PROGRESS
                                      ? 1 : 2));
    free (buf);
  }
}

static void
test_json_flat (void **state)
{
  char line[512];
  struct jf_object o;
  uint64_t v;
  bool b;

  strcpy (line, " { \"a\" : 18446744073709551615, \"b\":true,\"c\":null,"
          "\"d\":\"\\u00e9\\ud83d\\ude00\\/\",\"e\":-1,\"f\":1.5 }\n");
  assert_int_equal (jf_parse (line, &o), 0);
  assert_int_equal (o.n, 6);
  assert_true (jf_u64 (&o, "a", &v));
  assert_true (v == UINT64_MAX);
  assert_true (jf_bool (&o, "b", &b) && b);
  assert_int_equal (jf_find (&o, "c")->type, JF_NULL);
  assert_string_equal (jf_str (&o, "d"), "\xc3\xa9\xf0\x9f\x98\x80/");
  assert_false (jf_u64 (&o, "e", &v));
  assert_false (jf_u64 (&o, "f", &v));
  assert_false (jf_u64 (&o, "b", &v));
  assert_false (jf_u64 (&o, "zz", &v));
  assert_null (jf_str (&o, "a"));

  strcpy (line, "{\"big\":18446744073709551616}");
  assert_int_equal (jf_parse (line, &o), 0);
  assert_false (jf_u64 (&o, "big", &v));
  strcpy (line, "{}");
  assert_int_equal (jf_parse (line, &o), 0);
  assert_int_equal (o.n, 0);
}

/* A nested answer, as a Ceph monitor's df: the numbers of one pool. */
static void
test_json_nested (void **state)
{
  char line[] = "{\"stats\":{\"total_bytes\":9},\"stats_by_class\":{},"
    "\"pools\":[{\"name\":\"a]}\\\"\",\"id\":1,\"stats\":{\"max_avail\":5}},"
    " {\"name\":\"b\",\"id\":2,\"stats\":{\"max_avail\":7,\"stored\":3}} ,"
    "[1], 4, \"s\"], \"after\":1}\n";
  struct jf_object top, pool, stats;
  struct jf_member pools, e;
  char *cursor = NULL;
  uint64_t v, ids[2] = { 0 };
  size_t n = 0;

  assert_int_equal (jf_parse (line, &top), 0);
  assert_true (jf_u64 (&top, "after", &v) && v == 1);
  assert_int_equal (jf_find (&top, "stats")->type, JF_OBJECT);
  pools = *jf_find (&top, "pools");
  assert_int_equal (pools.type, JF_ARRAY);
  assert_int_equal (jf_open (&pools, &pool), -1);
  while (jf_next (&pools, &cursor, &e)) {
    if (n < 2) {
      assert_int_equal (jf_open (&e, &pool), 0);
      assert_true (jf_u64 (&pool, "id", &ids[n]));
      assert_int_equal (jf_open (jf_find (&pool, "stats"), &stats), 0);
      assert_true (jf_u64 (&stats, "max_avail", &v));
      assert_true (v == (n ? 7 : 5));
      if (n == 0)
        assert_string_equal (jf_str (&pool, "name"), "a]}\"");
    }
    else if (n == 2)
      assert_int_equal (e.type, JF_ARRAY);
    else if (n == 3)
      assert_int_equal (e.type, JF_NUMBER);
    else
      assert_string_equal (e.value, "s");
    n++;
  }
  assert_int_equal (n, 5);
  assert_true (ids[0] == 1 && ids[1] == 2);

  /* Nesting deeper than JF_MAX_DEPTH is refused. */
  {
    char deep[JF_MAX_DEPTH * 2 + 16] = "{\"a\":";

    for (int i = 0; i <= JF_MAX_DEPTH; i++)
      strcat (deep, "[");
    for (int i = 0; i <= JF_MAX_DEPTH; i++)
      strcat (deep, "]");
    strcat (deep, "}");
    assert_int_equal (jf_parse (deep, &top), -1);
  }
}

static void
test_json_flat_bad (void **state)
{
  static const char *const bad[] = {
    "", "[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x",
    "{\"a\":{\"b\":1}", "{\"a\":[1}", "{\"a\":{\"b\":\"x}}",
    "{\"a\":[\"x\\\"]}", "{\"a\":\"unterminated}",
    "{\"a\":\"bad \\x escape\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\u0000\"}",
    "{\"a\":\"\\udc00\"}", "{\"a\":\"\\ud800x\"}", "{a:1}", "{\"a\":tru}",
    "{\"a\":\"raw\ncontrol\"}", "{\"a\":-}",
  };
  char line[256];
  struct jf_object o;

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    strcpy (line, bad[i]);
    if (jf_parse (line, &o) != -1)
      fail_msg ("accepted: %s", bad[i]);
  }
  /* More members than the parser holds. */
  {
    char many[JF_MAX_MEMBERS * 24] = "{";

    for (int i = 0; i <= JF_MAX_MEMBERS; i++)
      snprintf (many + strlen (many), sizeof many - strlen (many),
                "%s\"k%d\":%d", i ? "," : "", i, i);
    strcat (many, "}");
    assert_int_equal (jf_parse (many, &o), -1);
  }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_requests),
    cmocka_unit_test (test_bad_requests),
    cmocka_unit_test (test_linebuf),
    cmocka_unit_test (test_json_roundtrip),
    cmocka_unit_test (test_json_quote_alike),
    cmocka_unit_test (test_flush_replies),
    cmocka_unit_test (test_json_flat),
    cmocka_unit_test (test_json_nested),
    cmocka_unit_test (test_json_flat_bad),
  };

  return cmocka_run_group_tests_name ("ctl-proto", tests, NULL, NULL);
}
