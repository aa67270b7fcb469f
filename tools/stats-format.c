/* discardcache: the statistics as a table and as Prometheus metrics
 * (see stats-format.h).
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "human.h"
#include "stats-format.h"

/* A counter the server did not send (an older server) reads as 0. */
static uint64_t
get (const struct jf_object *st, const char *key)
{
  uint64_t v = 0;

  jf_u64 (st, key, &v);
  return v;
}

static bool
flag (const struct jf_object *st, const char *key, bool dflt)
{
  bool v = dflt;

  jf_bool (st, key, &v);
  return v;
}

#define ROW "  %-22s "

static void
print_dropped (const struct jf_object *st, FILE *fp)
{
  static const struct { const char *key, *label; } reasons[] = {
    { "dropped_full_bytes", "at max-extents" },
    { "dropped_unsupported_bytes", "discard unsupported" },
    { "dropped_fragment_bytes", "sub-granule pieces" },
    { "dropped_nomem_bytes", "out of memory" },
    { "dropped_error_bytes", "after errors" },
  };
  char a[HUMAN_LEN];

  fprintf (fp, ROW "%" PRIu64 " extents (%s)\n", "dropped:",
           get (st, "dropped"), human_size (get (st, "dropped_bytes"), a));
  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    if (get (st, reasons[i].key))
      fprintf (fp, ROW "  %s %s\n", "", human_size (get (st, reasons[i].key), a),
               reasons[i].label);
}

void
stats_print_table (const struct jf_object *st, FILE *fp)
{
  uint64_t trimmed = get (st, "trim_bytes");
  char a[HUMAN_LEN], b[HUMAN_LEN];

  fprintf (fp, "discardcache statistics\n");
  fprintf (fp, ROW "%" PRIu64 " (%s)\n", "trims received:",
           get (st, "trims"), human_size (trimmed, a));
  fprintf (fp, ROW "%s of trimmed bytes (%s)\n", "cancelled by writes:",
           human_percent (get (st, "cancelled_by_writes"), trimmed, a),
           human_size (get (st, "cancelled_by_writes"), b));
  fprintf (fp, ROW "%s of trimmed bytes (%s)\n", "cancelled by zeroes:",
           human_percent (get (st, "cancelled_by_zeroes"), trimmed, a),
           human_size (get (st, "cancelled_by_zeroes"), b));
  fprintf (fp, ROW "%" PRIu64 "\n", "merged into pending:", get (st, "merges"));
  fprintf (fp, ROW "%" PRIu64 " discards (%s), %s of trims received\n",
           "forwarded:", get (st, "forwarded"),
           human_size (get (st, "forwarded_bytes"), a),
           human_percent (get (st, "forwarded"), get (st, "trims"), b));
  print_dropped (st, fp);
  fprintf (fp, ROW "%" PRIu64 " extents, %s (sub-granule %s)\n", "pending:",
           get (st, "pending_extents"), human_size (get (st, "pending_bytes"), a),
           human_size (get (st, "subgranule_bytes"), b));
  fprintf (fp, ROW "%" PRIu64 " discards (%s)\n", "in flight:",
           get (st, "inflight"), human_size (get (st, "inflight_bytes"), a));
  fprintf (fp, ROW "%" PRIu64 "\n", "writes that waited:", get (st, "write_waits"));
  fprintf (fp, ROW "%" PRIu64, "forward errors:", get (st, "forward_errors"));
  if (get (st, "last_error"))
    fprintf (fp, " (last: %s)", strerror ((int) get (st, "last_error")));
  fprintf (fp, "\n" ROW "%s\n", "backend discard:",
           flag (st, "discard_supported", true)
           ? "supported" : "NOT SUPPORTED (forwarding off)");
  fprintf (fp, ROW "%s\n", "flusher:",
           flag (st, "paused", false) ? "paused" : "running");
  fprintf (fp, ROW "%s, max discard %s\n", "granularity:",
           human_size (get (st, "granularity"), a),
           human_size (get (st, "max_discard"), b));
  fprintf (fp, ROW "%s for at most %" PRIu64 " extents\n", "memory:",
           human_size (get (st, "memory_bytes"), a), get (st, "max_extents"));
}

/* One metric per counter, HELP and TYPE once per name (the dropped
 * reasons share one name with a label).
 */
static const struct metric {
  const char *key;
  const char *name;
  const char *label;
  const char *type;
  const char *help;
} metrics[] = {
  { "trims", "trims_total", NULL, "counter", "TRIM requests received." },
  { "trim_bytes", "trim_bytes_total", NULL, "counter", "Bytes in the TRIM requests received." },
  { "cancelled_by_writes", "cancelled_by_writes_bytes_total", NULL, "counter", "Pending bytes cancelled by writes." },
  { "cancelled_by_zeroes", "cancelled_by_zeroes_bytes_total", NULL, "counter", "Pending bytes cancelled by zero requests." },
  { "merges", "merges_total", NULL, "counter", "TRIMs merged into pending extents." },
  { "forwarded", "forwarded_total", NULL, "counter", "Discard commands sent to the backend." },
  { "forwarded_bytes", "forwarded_bytes_total", NULL, "counter", "Bytes discarded on the backend." },
  { "dropped", "dropped_total", NULL, "counter", "Pending extents given up (counted, never silently)." },
  { "dropped_full_bytes", "dropped_bytes_total", "reason=\"full\"", "counter", "Pending bytes given up, by reason." },
  { "dropped_unsupported_bytes", "dropped_bytes_total", "reason=\"unsupported\"", NULL, NULL },
  { "dropped_fragment_bytes", "dropped_bytes_total", "reason=\"fragment\"", NULL, NULL },
  { "dropped_nomem_bytes", "dropped_bytes_total", "reason=\"nomem\"", NULL, NULL },
  { "dropped_error_bytes", "dropped_bytes_total", "reason=\"error\"", NULL, NULL },
  { "pending_extents", "pending_extents", NULL, "gauge", "Pending discard extents." },
  { "pending_bytes", "pending_bytes", NULL, "gauge", "Bytes in pending discard extents." },
  { "subgranule_bytes", "subgranule_bytes", NULL, "gauge", "Pending bytes in extents smaller than a granule." },
  { "inflight", "inflight", NULL, "gauge", "Discards being sent now." },
  { "inflight_bytes", "inflight_bytes", NULL, "gauge", "Bytes in the discards being sent now." },
  { "write_waits", "write_waits_total", NULL, "counter", "Writes that waited for a discard in flight." },
  { "forward_errors", "forward_errors_total", NULL, "counter", "Discards that failed and stayed pending." },
  { "last_error", "last_error", NULL, "gauge", "errno of the last failed discard, 0 if none." },
  { "granularity", "granularity_bytes", NULL, "gauge", "Discard granularity in bytes." },
  { "max_discard", "max_discard_bytes", NULL, "gauge", "Largest discard sent, in bytes." },
  { "max_extents", "max_extents", NULL, "gauge", "Bound on pending extents." },
  { "memory_bytes", "memory_bytes", NULL, "gauge", "Memory held by the extent map." },
  { "state_loaded_extents", "state_loaded_extents", NULL, "gauge", "Pending extents loaded from the state file at start." },
  { "state_loaded_bytes", "state_loaded_bytes", NULL, "gauge", "Bytes in the pending extents loaded from the state file at start." },
};

void
stats_print_prometheus (const struct jf_object *st, FILE *fp)
{
  uint64_t v;

  for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
    const struct metric *m = &metrics[i];

    if (!jf_u64 (st, m->key, &v))
      continue;
    if (m->help)
      fprintf (fp, "# HELP discardcache_%s %s\n# TYPE discardcache_%s %s\n",
               m->name, m->help, m->name, m->type);
    fprintf (fp, "discardcache_%s%s%s%s %" PRIu64 "\n", m->name,
             m->label ? "{" : "", m->label ? m->label : "",
             m->label ? "}" : "", v);
  }
  fprintf (fp, "# HELP discardcache_discard_supported 1 while the backend "
           "accepts discards.\n# TYPE discardcache_discard_supported gauge\n"
           "discardcache_discard_supported %d\n",
           flag (st, "discard_supported", true));
  fprintf (fp, "# HELP discardcache_paused 1 while forwarding is paused.\n"
           "# TYPE discardcache_paused gauge\ndiscardcache_paused %d\n",
           flag (st, "paused", false));
}
