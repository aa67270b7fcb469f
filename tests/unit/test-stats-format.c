/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the one statistics table (service/stats-table.h) and
 * what is written from it: the server's JSON and text lines, and
 * discardctl's table (every percentage in it) and Prometheus text.
 */
#include <config.h>

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json-flat.h"
#include "stats.h"
#include "stats-format.h"
#include "stats-table.h"

static bool
ends_with (const char *s, const char *suffix)
{
  size_t n = strlen (s), m = strlen (suffix);

  return n >= m && strcmp (s + n - m, suffix) == 0;
}

/* Each key once; Prometheus names in base units, counters (and only
 * they) ending in _total, one type a family, one series a label.
 */
static void
test_table (void **state)
{
  for (size_t i = 0; i < STATS_NKEYS; i++) {
    const struct stats_field *f = &stats_fields[i];

    assert_non_null (f->key);
    assert_non_null (f->help);
    for (size_t j = 0; j < i; j++)
      if (strcmp (stats_fields[j].key, f->key) == 0)
        fail_msg ("%s: twice in the table", f->key);
    if (f->metric == STATS_NONE)
      continue;
    assert_non_null (f->metric_name);
    if (ends_with (f->metric_name, "_total") != (f->metric == STATS_COUNTER))
      fail_msg ("%s: %s: only counters end in _total", f->key, f->metric_name);
    if (strstr (f->metric_name, "_us") || strstr (f->metric_name, "_ms") ||
        strstr (f->metric_name, "gib"))
      fail_msg ("%s: %s is not in base units", f->key, f->metric_name);
    for (size_t j = 0; j < i; j++) {
      const struct stats_field *g = &stats_fields[j];

      if (g->metric == STATS_NONE || strcmp (g->metric_name, f->metric_name))
        continue;
      if (g->metric != f->metric)
        fail_msg ("%s: a family of two types", f->metric_name);
      if (!g->label || !f->label || strcmp (g->label, f->label) == 0)
        fail_msg ("%s: %s and %s are one series", f->metric_name, g->key,
                  f->key);
    }
  }
}

/* Every field a distinct value, so that a key written with another's
 * value shows.
 */
static void
fill (struct volume_stats *st)
{
  memset (st, 0, sizeof *st);
  st->thin = true;
  for (size_t i = 0; i < STATS_NKEYS; i++) {
    char *p = (char *) st + stats_fields[i].offset;

    switch (stats_fields[i].type) {
    case STATS_U64: *(uint64_t *) p = 1000 + i; break;
    case STATS_INT: *(int *) p = (int) (2000 + i); break;
    case STATS_BOOL: *(bool *) p = i % 2; break;
    case STATS_PACE: *(enum pace_mode *) p = PACE_MEMORY; break;
    case STATS_STR: *(const char **) p = stats_fields[i].key; break;
    }
  }
}

static char *
json_of (const struct volume_stats *st)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&buf, &len);

  assert_non_null (fp);
  assert_int_equal (stats_write_json (st, fp), 0);
  assert_int_equal (fclose (fp), 0);
  return buf;
}

/* The server's JSON holds every field of the table with its value (so
 * any STAT_ key discardctl reads is there), thin mode's only with
 * thin=on, the counters first.
 */
static void
test_json (void **state)
{
  struct volume_stats st;
  struct jf_object o;
  char *json;
  uint64_t v;
  bool b;

  fill (&st);
  json = json_of (&st);
  assert_int_equal (jf_parse (json, &o), 0);
  assert_int_equal (o.n, 1 + STATS_NKEYS);      /* and "version" */
  for (size_t i = 0; i < STATS_NKEYS; i++) {
    const struct stats_field *f = &stats_fields[i];

    switch (f->type) {
    case STATS_U64:
      assert_true (jf_u64 (&o, f->key, &v));
      assert_int_equal (v, 1000 + i);
      break;
    case STATS_INT:
      assert_true (jf_u64 (&o, f->key, &v));
      assert_int_equal (v, 2000 + i);
      break;
    case STATS_BOOL:
      assert_true (jf_bool (&o, f->key, &b));
      assert_int_equal (b, i % 2);
      break;
    case STATS_PACE:
      assert_string_equal (jf_str (&o, f->key), "memory");
      break;
    case STATS_STR:
      assert_string_equal (jf_str (&o, f->key), f->key);
      break;
    }
  }
  free (json);

  st.thin = false;
  json = json_of (&st);
  assert_int_equal (jf_parse (json, &o), 0);
  for (size_t i = 0; i < STATS_NKEYS; i++)
    assert_int_equal (jf_find (&o, stats_fields[i].key) == NULL,
                      stats_fields[i].thin);
  free (json);

  json = json_of (&st);
  assert_non_null (strstr (json, "{\"version\":1,\"trims\":"));
  assert_non_null (strstr (json, ",\"last_error\":"));
  assert_true (strstr (json, "\"forced_by_memory\"") <
               strstr (json, "\"last_error\""));
  free (json);
}

/* Each pace mode by its one name. */
static void
test_pace_modes (void **state)
{
  static const char *const names[] = {
    [PACE_OFF] = "off", [PACE_PROBE] = "probe", [PACE_FITS] = "fits",
    [PACE_RARE] = "rare", [PACE_IDLE] = "idle", [PACE_MEMORY] = "memory",
  };

  for (size_t m = 0; m < sizeof names / sizeof names[0]; m++)
    assert_string_equal (pace_mode_name ((enum pace_mode) m), names[m]);
}

static char *
print_of (void (*print) (const struct jf_object *, FILE *), const char *json)
{
  char *copy = strdup (json), *buf = NULL;
  size_t len = 0;
  struct jf_object o;
  FILE *fp = open_memstream (&buf, &len);

  assert_non_null (copy);
  assert_non_null (fp);
  assert_int_equal (jf_parse (copy, &o), 0);
  print (&o, fp);
  assert_int_equal (fclose (fp), 0);
  free (copy);
  return buf;
}

/* Whether stats_fields[i] is the first of its Prometheus family. */
static bool
family_head (size_t i)
{
  if (stats_fields[i].metric == STATS_NONE)
    return false;
  for (size_t j = 0; j < i; j++)
    if (stats_fields[j].metric != STATS_NONE &&
        strcmp (stats_fields[j].metric_name, stats_fields[i].metric_name) == 0)
      return false;
  return true;
}

/* The Prometheus text: each exported field once, a family's series
 * together under one HELP and TYPE, scaled to base units.
 */
static void
test_prometheus (void **state)
{
  struct volume_stats st;
  char *json, *text, *p, want[512];
  char last[128] = "", done[STATS_NKEYS][128];
  size_t exported = 0, families = 0, series = 0, helps = 0, ndone = 0;

  fill (&st);
  json = json_of (&st);
  text = print_of (stats_print_prometheus, json);
  for (size_t i = 0; i < STATS_NKEYS; i++) {
    exported += stats_fields[i].metric != STATS_NONE;
    families += family_head (i);
  }
  snprintf (want, sizeof want, "\ndiscardcache_budget_seconds %.15g\n",
            (1000 + STAT_budget_us) / 1e6);
  assert_non_null (strstr (text, want));
  snprintf (want, sizeof want, "\ndiscardcache_drain_eta_seconds %.15g\n",
            (1000 + STAT_drain_eta_ms) / 1e3);
  assert_non_null (strstr (text, want));
  snprintf (want, sizeof want,
            "# HELP discardcache_dropped_bytes_total %s\n"
            "# TYPE discardcache_dropped_bytes_total counter\n"
            "discardcache_dropped_bytes_total{reason=\"full\"} %d\n",
            stats_fields[STAT_dropped_full_bytes].help,
            1000 + STAT_dropped_full_bytes);
  assert_non_null (strstr (text, want));
  snprintf (want, sizeof want, "\ndiscardcache_paused %d\n",
            STAT_paused % 2);
  assert_non_null (strstr (text, want));
  /* A state set: the one value the server reports, as a label. */
  assert_non_null (strstr (text, "\n# TYPE discardcache_breaker_state gauge\n"
                           "discardcache_breaker_state{state=\"breaker_state\"}"
                           " 1\n"));

  for (char *line = strtok_r (text, "\n", &p); line;
       line = strtok_r (NULL, "\n", &p)) {
    char name[128];

    if (strncmp (line, "# HELP ", 7) == 0) {
      helps++;
      continue;
    }
    if (line[0] == '#')
      continue;
    series++;
    snprintf (name, sizeof name, "%.*s", (int) strcspn (line, "{ "), line);
    if (strcmp (name, last) != 0) {
      for (size_t k = 0; k < ndone; k++)
        if (strcmp (done[k], name) == 0)
          fail_msg ("%s: its series are not together", name);
      assert_true (ndone < STATS_NKEYS);
      strcpy (done[ndone++], last);
      strcpy (last, name);
    }
  }
  assert_int_equal (series, exported);
  assert_int_equal (helps, families);
  free (text);
  free (json);
}

/* Every percentage in discardctl's table, bytes of bytes: numerators
 * and denominators chosen so that any other pairing prints another
 * number.  The headline's counts are never divided.
 */
static void
test_table_shares (void **state)
{
  static const char fresh[] =
    "{\"trims\":7,\"trim_bytes\":40960,\"forwarded\":1454,"
    "\"forwarded_bytes\":12288,\"cancelled_by_writes\":16384,"
    "\"cancelled_by_zeroes\":8192,\"already_clean_bytes\":20480,"
    "\"max_clean_extents\":100,\"state_loaded_bytes\":0}";
  static const char loaded[] =
    "{\"trims\":7,\"trim_bytes\":40960,\"forwarded\":1454,"
    "\"forwarded_bytes\":12288,\"cancelled_by_writes\":16384,"
    "\"cancelled_by_zeroes\":8192,\"already_clean_bytes\":20480,"
    "\"max_clean_extents\":100,\"state_loaded_bytes\":40960}";
  static const char *const fresh_lines[] = {
    "discardcache: 7 trims in, 1454 discards out (40.0 KiB in, 12.0 KiB out)\n",
    "  cancelled by writes:   40% of trimmed bytes (16.0 KiB)\n",
    "  cancelled by zeroes:   20% of trimmed bytes (8.0 KiB)\n",
    "  already clean:         50% of trimmed bytes (20.0 KiB) not sent again\n",
  };
  static const char *const loaded_lines[] = {
    "  cancelled by writes:   20% of bytes trimmed or loaded from state= (16.0 KiB)\n",
    "  cancelled by zeroes:   10% of bytes trimmed or loaded from state= (8.0 KiB)\n",
    "  already clean:         50% of trimmed bytes (20.0 KiB) not sent again\n",
  };
  char *text;
  size_t shares = 0;

  text = print_of (stats_print_table, fresh);
  for (size_t i = 0; i < sizeof fresh_lines / sizeof fresh_lines[0]; i++)
    if (strstr (text, fresh_lines[i]) == NULL)
      fail_msg ("no line '%s' in:\n%s", fresh_lines[i], text);
  /* No other percentage than those pinned above. */
  for (const char *p = text; (p = strchr (p, '%')) != NULL; p++)
    shares++;
  assert_int_equal (shares, 3);
  free (text);

  text = print_of (stats_print_table, loaded);
  for (size_t i = 0; i < sizeof loaded_lines / sizeof loaded_lines[0]; i++)
    if (strstr (text, loaded_lines[i]) == NULL)
      fail_msg ("no line '%s' in:\n%s", loaded_lines[i], text);
  free (text);
}

/* Thin mode's reuse reserve in discardctl's table: each figure in its
 * place, distinct values so that any other pairing prints another line.
 */
static void
test_table_reserve (void **state)
{
  static const char thin[] =
    "{\"thin_slots\":1024,\"thin_reserve_bytes\":3145728,"
    "\"thin_reserve_runs\":5,\"thin_reserve_limit\":67108864,"
    "\"thin_reserve_writes\":7,\"thin_discards_avoided\":11,"
    "\"thin_discards_avoided_bytes\":2097152,"
    "\"thin_reserve_released\":13,"
    "\"thin_reserve_released_bytes\":1048576}";
  static const char rows[] =
    "  reuse reserve:         3.0 MiB in 5 runs, of 64.0 MiB\n"
    "                         7 writes served from it; 11 discards avoided "
    "(2.0 MiB)\n"
    "                         13 runs discarded from it (1.0 MiB)\n";
  char *text;

  text = print_of (stats_print_table, thin);
  if (strstr (text, rows) == NULL)
    fail_msg ("no rows '%s' in:\n%s", rows, text);
  free (text);

  /* Identity mode: no thin rows at all. */
  text = print_of (stats_print_table, "{\"trims\":1}");
  assert_null (strstr (text, "reuse reserve:"));
  free (text);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_table),
    cmocka_unit_test (test_json),
    cmocka_unit_test (test_pace_modes),
    cmocka_unit_test (test_prometheus),
    cmocka_unit_test (test_table_shares),
    cmocka_unit_test (test_table_reserve),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
