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
#include "stats-table.h"

/* A reply holds every statistic and a few members of its own. */
_Static_assert (STATS_NKEYS + 16 <= JF_MAX_MEMBERS,
                "JF_MAX_MEMBERS cannot hold the statistics");

/* Statistics are named by their STAT_ key (stats-table.h), so that a
 * misspelt one does not compile.  A counter the server did not send (an
 * older server) reads as 0.
 */
static uint64_t
get (const struct jf_object *st, enum stats_key k)
{
  uint64_t v = 0;

  jf_u64 (st, stats_key_name (k), &v);
  return v;
}

static bool
flag (const struct jf_object *st, enum stats_key k, bool dflt)
{
  bool v = dflt;

  jf_bool (st, stats_key_name (k), &v);
  return v;
}

#define ROW "  %-22s "

/* A share, bytes of bytes: "row: P% of what (size of part)tail".  Every
 * percentage in the table is one, so that it never divides a count by
 * bytes or pieces sent by requests received.
 */
static void
print_share (FILE *fp, const char *row, uint64_t part, uint64_t whole,
             const char *what, const char *tail)
{
  char a[HUMAN_LEN], b[HUMAN_LEN];

  fprintf (fp, ROW "%s of %s (%s)%s\n", row, human_percent (part, whole, a),
           what, human_size (part, b), tail);
}

static void
print_dropped (const struct jf_object *st, FILE *fp)
{
  static const struct { enum stats_key key; const char *label; } reasons[] = {
    { STAT_dropped_full_bytes, "at max-extents" },
    { STAT_dropped_unsupported_bytes, "discard unsupported" },
    { STAT_dropped_fragment_bytes, "sub-granule pieces" },
    { STAT_dropped_nomem_bytes, "out of memory" },
    { STAT_dropped_error_bytes, "after errors" },
    { STAT_dropped_breaker_bytes, "at max-extents, breaker open" },
    { STAT_dropped_small_bytes, "held by small= at the stop" },
    { STAT_dropped_stop_bytes, "past stop-timeout=" },
  };
  char a[HUMAN_LEN];

  fprintf (fp, ROW "%" PRIu64 " extents (%s)\n", "dropped:",
           get (st, STAT_dropped), human_size (get (st, STAT_dropped_bytes), a));
  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    if (get (st, reasons[i].key))
      fprintf (fp, ROW "  %s %s\n", "", human_size (get (st, reasons[i].key), a),
               reasons[i].label);
}

/* Thin mode's reuse reserve (reserve=): what it holds and what reusing
 * it saved the device.
 */
static void
print_reserve (const struct jf_object *st, FILE *fp)
{
  char a[HUMAN_LEN], b[HUMAN_LEN];

  fprintf (fp, ROW "%s in %" PRIu64 " runs, of %s\n", "reuse reserve:",
           human_size (get (st, STAT_thin_reserve_bytes), a),
           get (st, STAT_thin_reserve_runs),
           human_size (get (st, STAT_thin_reserve_limit), b));
  fprintf (fp, ROW "%" PRIu64 " writes served from it; %" PRIu64
           " discards avoided (%s)\n", "",
           get (st, STAT_thin_reserve_writes),
           get (st, STAT_thin_discards_avoided),
           human_size (get (st, STAT_thin_discards_avoided_bytes), a));
  fprintf (fp, ROW "%" PRIu64 " runs discarded from it (%s)\n", "",
           get (st, STAT_thin_reserve_released),
           human_size (get (st, STAT_thin_reserve_released_bytes), a));
}

/* Thin mode's rows, only from a server with thin=on. */
static void
print_thin (const struct jf_object *st, FILE *fp)
{
  uint64_t v;
  char a[HUMAN_LEN], b[HUMAN_LEN];

  if (!jf_u64 (st, stats_key_name (STAT_thin_slots), &v))
    return;
  fprintf (fp, ROW "%s exported, slots of %s\n", "thin:",
           human_size (get (st, STAT_thin_size), a),
           human_size (get (st, STAT_thin_slot), b));
  fprintf (fp, ROW "%" PRIu64 " (%s); the trims above are per slot\n",
           "trims from the client:", get (st, STAT_thin_trims),
           human_size (get (st, STAT_thin_trim_bytes), a));
  fprintf (fp, ROW "%" PRIu64 " mapped, %" PRIu64 " free-clean, %" PRIu64
           " free-pending-discard, %" PRIu64 " awaiting commit, of %" PRIu64
           "\n", "slots:", get (st, STAT_thin_mapped),
           get (st, STAT_thin_free_clean), get (st, STAT_thin_free_pending),
           get (st, STAT_thin_free_undurable), v);
  fprintf (fp, ROW "%" PRIu64 " mapped, %" PRIu64 " free-pending-discard "
           "(largest %" PRIu64 " slots), %" PRIu64 " free-clean; %s of maps\n",
           "runs:", get (st, STAT_thin_mapped_runs),
           get (st, STAT_thin_free_pending_runs),
           get (st, STAT_thin_free_pending_largest),
           get (st, STAT_thin_free_clean_runs),
           human_size (get (st, STAT_thin_memory_bytes), a));
  fprintf (fp, ROW "%" PRIu64 " allocated, %" PRIu64 " reused (discard "
           "cancelled), %" PRIu64 " zero-filled, %" PRIu64 " writes failed "
           "ENOSPC\n", "slot use:",
           get (st, STAT_thin_allocated), get (st, STAT_thin_reused),
           get (st, STAT_thin_zero_fills), get (st, STAT_thin_enospc));
  print_reserve (st, fp);
  fprintf (fp, ROW "%s, %" PRIu64 " commits, %" PRIu64 " checkpoints, last "
           "at %" PRIu64 " (unix time)\n", "journal:",
           human_size (get (st, STAT_thin_journal_bytes), a),
           get (st, STAT_thin_commits), get (st, STAT_thin_checkpoints),
           get (st, STAT_thin_last_checkpoint));
}

/* The known-clean map (max-clean-extents=): what it saved the device. */
static void
print_clean (const struct jf_object *st, FILE *fp)
{
  uint64_t already = get (st, STAT_already_clean_bytes);
  char a[HUMAN_LEN], b[HUMAN_LEN];

  if (get (st, STAT_max_clean_extents) == 0) {
    fprintf (fp, ROW "off (every TRIM is sent)\n", "known clean:");
    return;
  }
  fprintf (fp, ROW "%" PRIu64 " extents, %s, memory %s for at most %" PRIu64
           "\n", "known clean:", get (st, STAT_clean_extents),
           human_size (get (st, STAT_clean_bytes), a),
           human_size (get (st, STAT_clean_memory_bytes), b),
           get (st, STAT_max_clean_extents));
  print_share (fp, "already clean:", already, get (st, STAT_trim_bytes),
               "trimmed bytes", " not sent again");
  if (get (st, STAT_clean_forgotten_bytes))
    fprintf (fp, ROW "%s at the bound (their next TRIM is sent)\n",
             "  forgotten:", human_size (get (st, STAT_clean_forgotten_bytes), a));
}

/* budget=: what the flusher decided, and what it measured to decide. */
static void
print_pacing (const struct jf_object *st, FILE *fp)
{
  const char *mode = jf_str (st, stats_key_name (STAT_pace_mode));
  char a[HUMAN_LEN], b[HUMAN_LEN];

  if (get (st, STAT_budget_us) == 0)
    return;
  fprintf (fp, ROW "budget %" PRIu64 " us, mode %s, batch %s, gap %" PRIu64 " us\n",
           "pacing:", get (st, STAT_budget_us), mode ? mode : "?",
           human_size (get (st, STAT_pace_max_len), a), get (st, STAT_pace_gap_us));
  fprintf (fp, ROW "%s/s in %" PRIu64 " discards/s, drain in %s\n", "pace:",
           human_size (get (st, STAT_pace_bytes_per_s), a),
           get (st, STAT_pace_commands_per_s),
           human_duration (get (st, STAT_drain_eta_ms), b));
  fprintf (fp, ROW "%" PRIu64 " us per discard + %" PRIu64 " us per GiB\n",
           "cost model:", get (st, STAT_model_a_us), get (st, STAT_model_b_us_per_gib));
  fprintf (fp, ROW "p99 %" PRIu64 " us beside a discard, %" PRIu64
           " us without (stall %" PRIu64 " us)\n", "clients:",
           get (st, STAT_client_p99_discard_us), get (st, STAT_client_p99_us),
           get (st, STAT_stall_us));
  fprintf (fp, ROW "%" PRIu64 " budget overruns, %" PRIu64
           " discards forced by the memory bound\n", "",
           get (st, STAT_budget_overruns), get (st, STAT_forced_by_memory));
}

/* What writes and zeroes cancelled, of the bytes that could become
 * pending: those trimmed, and those loaded from state= at the start
 * (else a restart with a state file could show more than 100%).
 */
static void
print_cancelled (const struct jf_object *st, FILE *fp)
{
  uint64_t loaded = get (st, STAT_state_loaded_bytes);
  uint64_t whole = get (st, STAT_trim_bytes) + loaded;
  const char *what = loaded ? "bytes trimmed or loaded from state="
                            : "trimmed bytes";

  print_share (fp, "cancelled by writes:", get (st, STAT_cancelled_by_writes),
               whole, what, "");
  print_share (fp, "cancelled by zeroes:", get (st, STAT_cancelled_by_zeroes),
               whole, what, "");
}

/* Invariant 11: the circuit breaker, the windows, proof of effect. */
static void
print_protection (const struct jf_object *st, FILE *fp)
{
  const char *state = jf_str (st, stats_key_name (STAT_breaker_state));
  const char *reason = jf_str (st, stats_key_name (STAT_breaker_reason));
  char a[HUMAN_LEN], b[HUMAN_LEN];

  if (state == NULL)
    return;
  fprintf (fp, ROW "%s", "circuit breaker:", state);
  if (strcmp (state, "closed") != 0)
    fprintf (fp, " (%s), next probe in %s", reason ? reason : "?",
             human_duration (get (st, STAT_breaker_next_probe_ms), a));
  fprintf (fp, "; opened %" PRIu64 " times, %" PRIu64 " probes\n",
           get (st, STAT_breaker_opened), get (st, STAT_breaker_probes));
  if (!flag (st, STAT_window_open, true))
    fprintf (fp, ROW "closed, forwarding held for %s%s\n", "window:",
             human_duration (get (st, STAT_window_wait_ms), a),
             get (st, STAT_pressure) ? " (but under pressure)" : "");
  if (!flag (st, STAT_proof_supported, true))
    fprintf (fp, ROW "not possible on this backend (no allocation status)\n",
             "proof of effect:");
  else if (get (st, STAT_proof_sample_ppm))
    fprintf (fp, ROW "%s checked, %s still allocated (ineffective), "
             "%" PRIu64 " skipped\n", "proof of effect:",
             human_size (get (st, STAT_proof_checked_bytes), a),
             human_size (get (st, STAT_proof_ineffective_bytes), b),
             get (st, STAT_proof_skipped));
}

void
stats_print_table (const struct jf_object *st, FILE *fp)
{
  uint64_t trimmed = get (st, STAT_trim_bytes);
  char a[HUMAN_LEN], b[HUMAN_LEN];

  /* Counts in and out differ in kind (merging joins trims, splitting at
   * max-discard cuts them), so the headline sets them side by side
   * rather than as a ratio.
   */
  fprintf (fp, "discardcache: %" PRIu64 " trims in, %" PRIu64
           " discards out (%s in, %s out)\n", get (st, STAT_trims),
           get (st, STAT_forwarded), human_size (trimmed, a),
           human_size (get (st, STAT_forwarded_bytes), b));
  print_cancelled (st, fp);
  fprintf (fp, ROW "%" PRIu64 "\n", "merged into pending:", get (st, STAT_merges));
  print_dropped (st, fp);
  fprintf (fp, ROW "%" PRIu64 " extents, %s (sub-granule %s)\n", "pending:",
           get (st, STAT_pending_extents), human_size (get (st, STAT_pending_bytes), a),
           human_size (get (st, STAT_subgranule_bytes), b));
  fprintf (fp, ROW "%" PRIu64 " discards (%s)\n", "in flight:",
           get (st, STAT_inflight), human_size (get (st, STAT_inflight_bytes), a));
  fprintf (fp, ROW "%" PRIu64 "\n", "writes that waited:", get (st, STAT_write_waits));
  fprintf (fp, ROW "%" PRIu64, "forward errors:", get (st, STAT_forward_errors));
  if (get (st, STAT_last_error))
    fprintf (fp, " (last: %s)", strerror ((int) get (st, STAT_last_error)));
  fprintf (fp, "\n" ROW "%s\n", "backend discard:",
           flag (st, STAT_discard_supported, true)
           ? "supported" : "NOT SUPPORTED (forwarding off)");
  fprintf (fp, ROW "%s\n", "flusher:",
           flag (st, STAT_paused, false) ? "paused" : "running");
  fprintf (fp, ROW "%s, max discard %s\n", "granularity:",
           human_size (get (st, STAT_granularity), a),
           human_size (get (st, STAT_max_discard), b));
  if (get (st, STAT_backend_allocated_bytes))
    fprintf (fp, ROW "%s\n", "backend holds:",
             human_size (get (st, STAT_backend_allocated_bytes), a));
  fprintf (fp, ROW "%s for at most %" PRIu64 " extents\n", "memory:",
           human_size (get (st, STAT_memory_bytes), a), get (st, STAT_max_extents));
  print_clean (st, fp);
  print_protection (st, fp);
  print_thin (st, fp);
  print_pacing (st, fp);
}

/* One metric per statistic the table exports, in base units (seconds,
 * bytes): the server's microseconds and milliseconds are divided by the
 * field's scale.  A family (one name, several labels) is written
 * together, under the HELP and TYPE of its first member, where that
 * member stands in the table.
 */
static void
print_metric (const struct jf_object *st, const struct stats_field *family,
              const struct stats_field *f, bool *header, FILE *fp)
{
  uint64_t v;
  bool b;

  const char *state = NULL;

  if (f->type == STATS_STR ? (state = jf_str (st, f->key)) == NULL
      : f->type == STATS_BOOL ? !jf_bool (st, f->key, &b)
      : !jf_u64 (st, f->key, &v))
    return;
  if (!*header)
    fprintf (fp, "# HELP discardcache_%s %s\n# TYPE discardcache_%s %s\n",
             family->metric_name, family->help, family->metric_name,
             family->metric == STATS_COUNTER ? "counter" : "gauge");
  *header = true;
  if (f->metric == STATS_STATE) {
    fprintf (fp, "discardcache_%s{%s=\"%s\"} 1\n", f->metric_name, f->label,
             state);
    return;
  }
  fprintf (fp, "discardcache_%s%s%s%s ", f->metric_name,
           f->label ? "{" : "", f->label ? f->label : "", f->label ? "}" : "");
  /* 15 digits: exact for any count of microseconds below 10^15. */
  if (f->type == STATS_BOOL)
    fprintf (fp, "%d\n", b);
  else if (f->scale == 1)
    fprintf (fp, "%" PRIu64 "\n", v);
  else
    fprintf (fp, "%.15g\n", v / f->scale);
}

/* Whether an earlier field has the metric name of stats_fields[i]. */
static bool
family_seen (size_t i)
{
  for (size_t j = 0; j < i; j++)
    if (stats_fields[j].metric != STATS_NONE &&
        strcmp (stats_fields[j].metric_name, stats_fields[i].metric_name) == 0)
      return true;
  return false;
}

void
stats_print_prometheus (const struct jf_object *st, FILE *fp)
{
  for (size_t i = 0; i < STATS_NKEYS; i++) {
    bool header = false;

    if (stats_fields[i].metric == STATS_NONE || family_seen (i))
      continue;
    for (size_t j = i; j < STATS_NKEYS; j++)
      if (stats_fields[j].metric != STATS_NONE &&
          strcmp (stats_fields[j].metric_name, stats_fields[i].metric_name) == 0)
        print_metric (st, &stats_fields[i], &stats_fields[j], &header, fp);
  }
}
