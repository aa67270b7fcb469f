/* SPDX-License-Identifier: BSD-3-Clause */
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

/* Thin mode's rows, only from a server with thin=on. */
static void
print_thin (const struct jf_object *st, FILE *fp)
{
  uint64_t v;
  char a[HUMAN_LEN], b[HUMAN_LEN];

  if (!jf_u64 (st, "thin_slots", &v))
    return;
  fprintf (fp, ROW "%s exported, slots of %s\n", "thin:",
           human_size (get (st, "thin_size"), a),
           human_size (get (st, "thin_slot"), b));
  fprintf (fp, ROW "%" PRIu64 " (%s); the trims above are per slot\n",
           "trims from the client:", get (st, "thin_trims"),
           human_size (get (st, "thin_trim_bytes"), a));
  fprintf (fp, ROW "%" PRIu64 " mapped, %" PRIu64 " free-clean, %" PRIu64
           " free-pending-discard, %" PRIu64 " awaiting commit, of %" PRIu64
           "\n", "slots:", get (st, "thin_mapped"),
           get (st, "thin_free_clean"), get (st, "thin_free_pending"),
           get (st, "thin_free_undurable"), v);
  fprintf (fp, ROW "%" PRIu64 " mapped, %" PRIu64 " free-pending-discard "
           "(largest %" PRIu64 " slots), %" PRIu64 " free-clean; %s of maps\n",
           "runs:", get (st, "thin_mapped_runs"),
           get (st, "thin_free_pending_runs"),
           get (st, "thin_free_pending_largest"),
           get (st, "thin_free_clean_runs"),
           human_size (get (st, "thin_memory_bytes"), a));
  fprintf (fp, ROW "%" PRIu64 " allocated, %" PRIu64 " reused (discard "
           "cancelled), %" PRIu64 " zero-filled, %" PRIu64 " writes failed "
           "ENOSPC\n", "slot use:",
           get (st, "thin_allocated"), get (st, "thin_reused"),
           get (st, "thin_zero_fills"), get (st, "thin_enospc"));
  fprintf (fp, ROW "%s, %" PRIu64 " commits, %" PRIu64 " checkpoints, last "
           "at %" PRIu64 " (unix time)\n", "journal:",
           human_size (get (st, "thin_journal_bytes"), a),
           get (st, "thin_commits"), get (st, "thin_checkpoints"),
           get (st, "thin_last_checkpoint"));
}

/* The known-clean map (max-clean-extents=): what it saved the device. */
static void
print_clean (const struct jf_object *st, FILE *fp)
{
  uint64_t already = get (st, "already_clean_bytes");
  char a[HUMAN_LEN], b[HUMAN_LEN];

  if (get (st, "max_clean_extents") == 0) {
    fprintf (fp, ROW "off (every TRIM is sent)\n", "known clean:");
    return;
  }
  fprintf (fp, ROW "%" PRIu64 " extents, %s, memory %s for at most %" PRIu64
           "\n", "known clean:", get (st, "clean_extents"),
           human_size (get (st, "clean_bytes"), a),
           human_size (get (st, "clean_memory_bytes"), b),
           get (st, "max_clean_extents"));
  fprintf (fp, ROW "%s of trimmed bytes (%s) not sent again\n",
           "already clean:", human_percent (already, get (st, "trim_bytes"), a),
           human_size (already, b));
  if (get (st, "clean_forgotten_bytes"))
    fprintf (fp, ROW "%s at the bound (their next TRIM is sent)\n",
             "  forgotten:", human_size (get (st, "clean_forgotten_bytes"), a));
}

/* budget=: what the flusher decided, and what it measured to decide. */
static void
print_pacing (const struct jf_object *st, FILE *fp)
{
  const char *mode = jf_str (st, "pace_mode");
  char a[HUMAN_LEN], b[HUMAN_LEN];

  if (get (st, "budget_us") == 0)
    return;
  fprintf (fp, ROW "budget %" PRIu64 " us, mode %s, batch %s, gap %" PRIu64 " us\n",
           "pacing:", get (st, "budget_us"), mode ? mode : "?",
           human_size (get (st, "pace_max_len"), a), get (st, "pace_gap_us"));
  fprintf (fp, ROW "%s/s in %" PRIu64 " discards/s, drain in %s\n", "pace:",
           human_size (get (st, "pace_bytes_per_s"), a),
           get (st, "pace_commands_per_s"),
           human_duration (get (st, "drain_eta_ms"), b));
  fprintf (fp, ROW "%" PRIu64 " us per discard + %" PRIu64 " us per GiB\n",
           "cost model:", get (st, "model_a_us"), get (st, "model_b_us_per_gib"));
  fprintf (fp, ROW "p99 %" PRIu64 " us beside a discard, %" PRIu64
           " us without (stall %" PRIu64 " us)\n", "clients:",
           get (st, "client_p99_discard_us"), get (st, "client_p99_us"),
           get (st, "stall_us"));
  fprintf (fp, ROW "%" PRIu64 " budget overruns, %" PRIu64
           " discards forced by the memory bound\n", "",
           get (st, "budget_overruns"), get (st, "forced_by_memory"));
}

void
stats_print_table (const struct jf_object *st, FILE *fp)
{
  uint64_t trimmed = get (st, "trim_bytes");
  char a[HUMAN_LEN], b[HUMAN_LEN];

  /* Counts in and out differ in kind (merging joins trims, splitting at
   * max-discard cuts them), so the headline sets them side by side
   * rather than as a ratio.
   */
  fprintf (fp, "discardcache: %" PRIu64 " trims in, %" PRIu64
           " discards out (%s in, %s out)\n", get (st, "trims"),
           get (st, "forwarded"), human_size (trimmed, a),
           human_size (get (st, "forwarded_bytes"), b));
  fprintf (fp, ROW "%s of trimmed bytes (%s)\n", "cancelled by writes:",
           human_percent (get (st, "cancelled_by_writes"), trimmed, a),
           human_size (get (st, "cancelled_by_writes"), b));
  fprintf (fp, ROW "%s of trimmed bytes (%s)\n", "cancelled by zeroes:",
           human_percent (get (st, "cancelled_by_zeroes"), trimmed, a),
           human_size (get (st, "cancelled_by_zeroes"), b));
  fprintf (fp, ROW "%" PRIu64 "\n", "merged into pending:", get (st, "merges"));
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
  if (get (st, "backend_allocated_bytes"))
    fprintf (fp, ROW "%s\n", "backend holds:",
             human_size (get (st, "backend_allocated_bytes"), a));
  fprintf (fp, ROW "%s for at most %" PRIu64 " extents\n", "memory:",
           human_size (get (st, "memory_bytes"), a), get (st, "max_extents"));
  print_clean (st, fp);
  print_thin (st, fp);
  print_pacing (st, fp);
}

/* One metric per counter, HELP and TYPE once per name (the dropped
 * reasons share one name with a label).  Names are in base units
 * (seconds, bytes) as Prometheus wants: the server's microseconds and
 * milliseconds are divided by the metric's divisor.
 */
#define US 1e6                          /* microseconds to seconds */
#define MS 1e3                          /* milliseconds to seconds */
#define US_PER_GIB (1e6 * 1073741824.0) /* us per GiB to s per byte */

static const struct metric {
  const char *key;
  const char *name;
  const char *label;
  const char *type;
  double divisor;              /* 1: the server's number as it is */
  const char *help;
} metrics[] = {
  { "trims", "trims_total", NULL, "counter", 1, "TRIM requests received." },
  { "trim_bytes", "trim_bytes_total", NULL, "counter", 1, "Bytes in the TRIM requests received." },
  { "cancelled_by_writes", "cancelled_by_writes_bytes_total", NULL, "counter", 1, "Pending bytes cancelled by writes." },
  { "cancelled_by_zeroes", "cancelled_by_zeroes_bytes_total", NULL, "counter", 1, "Pending bytes cancelled by zero requests." },
  { "merges", "merges_total", NULL, "counter", 1, "TRIMs merged into pending extents." },
  { "forwarded", "forwarded_total", NULL, "counter", 1, "Discard commands sent to the backend." },
  { "forwarded_bytes", "forwarded_bytes_total", NULL, "counter", 1, "Bytes discarded on the backend." },
  { "dropped", "dropped_total", NULL, "counter", 1, "Pending extents given up (counted, never silently)." },
  { "dropped_full_bytes", "dropped_bytes_total", "reason=\"full\"", "counter", 1, "Pending bytes given up, by reason." },
  { "dropped_unsupported_bytes", "dropped_bytes_total", "reason=\"unsupported\"", NULL, 1, NULL },
  { "dropped_fragment_bytes", "dropped_bytes_total", "reason=\"fragment\"", NULL, 1, NULL },
  { "dropped_nomem_bytes", "dropped_bytes_total", "reason=\"nomem\"", NULL, 1, NULL },
  { "dropped_error_bytes", "dropped_bytes_total", "reason=\"error\"", NULL, 1, NULL },
  { "pending_extents", "pending_extents", NULL, "gauge", 1, "Pending discard extents." },
  { "pending_bytes", "pending_bytes", NULL, "gauge", 1, "Bytes in pending discard extents." },
  { "subgranule_bytes", "subgranule_bytes", NULL, "gauge", 1, "Pending bytes in extents smaller than a granule." },
  { "inflight", "inflight", NULL, "gauge", 1, "Discards being sent now." },
  { "inflight_bytes", "inflight_bytes", NULL, "gauge", 1, "Bytes in the discards being sent now." },
  { "write_waits", "write_waits_total", NULL, "counter", 1, "Writes that waited for a discard in flight." },
  { "forward_errors", "forward_errors_total", NULL, "counter", 1, "Discards that failed and stayed pending." },
  { "last_error", "last_error", NULL, "gauge", 1, "errno of the last failed discard, 0 if none." },
  { "granularity", "granularity_bytes", NULL, "gauge", 1, "Discard granularity in bytes." },
  { "max_discard", "max_discard_bytes", NULL, "gauge", 1, "Largest discard sent, in bytes." },
  { "max_extents", "max_extents", NULL, "gauge", 1, "Bound on pending extents." },
  { "backend_allocated_bytes", "backend_allocated_bytes", NULL, "gauge", 1, "Space the backend holds for the data (file blocks, RBD objects as rbd du counts them), refreshed at most every few seconds; 0 when the backend cannot tell." },
  { "memory_bytes", "memory_bytes", NULL, "gauge", 1, "Memory held by the extent map." },
  { "state_loaded_extents", "state_loaded_extents", NULL, "gauge", 1, "Pending extents loaded from the state file at start." },
  { "state_loaded_bytes", "state_loaded_bytes", NULL, "gauge", 1, "Bytes in the pending extents loaded from the state file at start." },
  { "already_clean_bytes", "already_clean_bytes_total", NULL, "counter", 1, "Trimmed bytes not sent again: the backend had discarded them and nothing had written them since." },
  { "clean_extents", "clean_extents", NULL, "gauge", 1, "Ranges known clean (discarded, not written since)." },
  { "clean_bytes", "clean_bytes", NULL, "gauge", 1, "Bytes known clean." },
  { "clean_memory_bytes", "clean_memory_bytes", NULL, "gauge", 1, "Memory held by the known-clean map." },
  { "clean_forgotten_bytes", "clean_forgotten_bytes_total", NULL, "counter", 1, "Known-clean bytes forgotten at max-clean-extents (their next TRIM is sent)." },
  { "max_clean_extents", "max_clean_extents", NULL, "gauge", 1, "Bound on known-clean extents (0: off)." },
  { "state_loaded_clean_extents", "state_loaded_clean_extents", NULL, "gauge", 1, "Known-clean extents loaded from the state file at start." },
  { "state_loaded_clean_bytes", "state_loaded_clean_bytes", NULL, "gauge", 1, "Bytes in the known-clean extents loaded from the state file at start." },
  { "thin_slots", "thin_slots", NULL, "gauge", 1, "Thin mode: physical slots in the pool." },
  { "thin_trims", "thin_trims_total", NULL, "counter", 1, "Thin mode: TRIM requests received from the client." },
  { "thin_trim_bytes", "thin_trim_bytes_total", NULL, "counter", 1, "Thin mode: bytes in the client's TRIM requests." },
  { "thin_mapped", "thin_slots_mapped", NULL, "gauge", 1, "Thin mode: slots mapped." },
  { "thin_mapped_runs", "thin_runs_mapped", NULL, "gauge", 1, "Thin mode: runs of mapped slots (logically and physically consecutive)." },
  { "thin_free_clean", "thin_slots_free", "state=\"clean\"", "gauge", 1, "Thin mode: free slots, by state." },
  { "thin_free_pending", "thin_slots_free", "state=\"pending_discard\"", NULL, 1, NULL },
  { "thin_free_undurable", "thin_slots_free", "state=\"awaiting_commit\"", NULL, 1, NULL },
  { "thin_free_zero", "thin_slots_free_zero", NULL, "gauge", 1, "Thin mode: clean free slots known to read as zeros." },
  { "thin_free_pending_runs", "thin_runs_free", "state=\"pending_discard\"", "gauge", 1, "Thin mode: runs of free slots, by state." },
  { "thin_free_clean_runs", "thin_runs_free", "state=\"clean\"", NULL, 1, NULL },
  { "thin_free_pending_largest", "thin_largest_run_free_slots", "state=\"pending_discard\"", "gauge", 1, "Thin mode: the largest run of free slots whose discard may be pending." },
  { "thin_allocated", "thin_allocated_total", NULL, "counter", 1, "Thin mode: slots allocated." },
  { "thin_reused", "thin_reused_total", NULL, "counter", 1, "Thin mode: slots reused while their discard was pending." },
  { "thin_enospc", "thin_enospc_total", NULL, "counter", 1, "Thin mode: writes failed for want of a free slot." },
  { "thin_zero_fills", "thin_zero_fills_total", NULL, "counter", 1, "Thin mode: zero requests filling the uncovered part of a new slot." },
  { "thin_map_bytes", "thin_map_bytes", NULL, "gauge", 1, "Thin mode: memory of the map of runs." },
  { "thin_memory_bytes", "thin_memory_bytes", NULL, "gauge", 1, "Thin mode: memory of the map and the free space maps." },
  { "thin_commits", "thin_commits_total", NULL, "counter", 1, "Thin mode: journal commits." },
  { "thin_journal_bytes", "thin_journal_bytes", NULL, "gauge", 1, "Thin mode: size of the meta file." },
  { "thin_checkpoints", "thin_checkpoints_total", NULL, "counter", 1, "Thin mode: checkpoints written." },
  { "thin_last_checkpoint", "thin_last_checkpoint_timestamp_seconds", NULL, "gauge", 1, "Thin mode: unix time of the last checkpoint (0: none yet)." },
  { "discard_p99_us_64k", "discard_p99_seconds", "size=\"64k\"", "gauge", US, "p99 latency of forwarded discards, by size class." },
  { "discard_p99_us_1m", "discard_p99_seconds", "size=\"1m\"", NULL, US, NULL },
  { "discard_p99_us_16m", "discard_p99_seconds", "size=\"16m\"", NULL, US, NULL },
  { "discard_p99_us_large", "discard_p99_seconds", "size=\"large\"", NULL, US, NULL },
  { "client_p99_us", "client_p99_seconds", "discard=\"no\"", "gauge", US, "p99 latency of client requests over 2 s, by whether a discard was in flight." },
  { "client_p99_discard_us", "client_p99_seconds", "discard=\"yes\"", NULL, US, NULL },
  { "stall_us", "stall_seconds", NULL, "gauge", US, "Client p99 with a discard in flight minus without." },
  { "model_a_us", "model_seconds_per_command", NULL, "gauge", US, "Fitted discard cost per command." },
  { "model_b_us_per_gib", "model_seconds_per_byte", NULL, "gauge", US_PER_GIB, "Fitted discard cost per byte discarded." },
  { "budget_us", "budget_seconds", NULL, "gauge", US, "budget= (0: no pacing)." },
  { "pace_bytes_per_s", "pace_bytes_per_second", NULL, "gauge", 1, "Bytes forwarded in the last second." },
  { "pace_commands_per_s", "pace_commands_per_second", NULL, "gauge", 1, "Discards forwarded in the last second." },
  { "drain_eta_ms", "drain_eta_seconds", NULL, "gauge", MS, "Time to forward the pending bytes at the current pace." },
  { "budget_overruns", "budget_overruns_total", NULL, "counter", 1, "Seconds whose client p99 beat the budget while discards ran." },
  { "forced_by_memory", "forced_by_memory_total", NULL, "counter", 1, "Discards forwarded past the budget near max-extents." },
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
    fprintf (fp, "discardcache_%s%s%s%s ", m->name,
             m->label ? "{" : "", m->label ? m->label : "",
             m->label ? "}" : "");
    /* 15 digits: exact for any count of microseconds below 10^15. */
    if (m->divisor == 1)
      fprintf (fp, "%" PRIu64 "\n", v);
    else
      fprintf (fp, "%.15g\n", v / m->divisor);
  }
  fprintf (fp, "# HELP discardcache_discard_supported 1 while the backend "
           "accepts discards.\n# TYPE discardcache_discard_supported gauge\n"
           "discardcache_discard_supported %d\n",
           flag (st, "discard_supported", true));
  fprintf (fp, "# HELP discardcache_paused 1 while forwarding is paused.\n"
           "# TYPE discardcache_paused gauge\ndiscardcache_paused %d\n",
           flag (st, "paused", false));
}
