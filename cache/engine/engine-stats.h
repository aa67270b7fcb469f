/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the engine's statistics, listed once (the form of an
 * entry is in stats-def.h).  engine.h makes struct engine_stats of it;
 * the service writes the JSON and the text lines from it, and
 * discardctl its table and its Prometheus text, so a field named here
 * is everywhere and a name missing here is an error where it is used.
 * The JSON keeps this order, the u64 fields first.
 */
#ifndef DISCARDCACHE_ENGINE_STATS_H
#define DISCARDCACHE_ENGINE_STATS_H

#include "pacing.h"
#include "stats-def.h"

#define ENGINE_STATS(X)                                                      \
  X (U64, trims, COUNTER, "trims_total", NULL, 1,                            \
     "TRIM requests received.")                                              \
  X (U64, trim_bytes, COUNTER, "trim_bytes_total", NULL, 1,                  \
     "Bytes in the TRIM requests received.")                                 \
  X (U64, cancelled_by_writes, COUNTER, "cancelled_by_writes_bytes_total",   \
     NULL, 1,                                                                \
     "Pending bytes cancelled by writes.")                                   \
  X (U64, cancelled_by_zeroes, COUNTER, "cancelled_by_zeroes_bytes_total",   \
     NULL, 1,                                                                \
     "Pending bytes cancelled by zero requests.")                            \
  X (U64, merges, COUNTER, "merges_total", NULL, 1,                          \
     "TRIMs merged into pending extents.")                                   \
  X (U64, forwarded, COUNTER, "forwarded_total", NULL, 1,                    \
     "Discard commands sent to the backend.")                                \
  X (U64, forwarded_bytes, COUNTER, "forwarded_bytes_total", NULL, 1,        \
     "Bytes discarded on the backend.")                                      \
  X (U64, dropped, COUNTER, "dropped_total", NULL, 1,                        \
     "Pending extents given up (counted, never silently).")                  \
  X (U64, dropped_bytes, NONE, NULL, NULL, 1,                                \
     "Pending bytes given up, the sum of the reasons below.")                \
  X (U64, dropped_full_bytes, COUNTER, "dropped_bytes_total",                \
     "reason=\"full\"", 1,                                                   \
     "Pending bytes given up, by reason.")                                   \
  X (U64, dropped_unsupported_bytes, COUNTER, "dropped_bytes_total",         \
     "reason=\"unsupported\"", 1,                                            \
     "Pending bytes given up: the backend cannot discard.")                  \
  X (U64, dropped_fragment_bytes, COUNTER, "dropped_bytes_total",            \
     "reason=\"fragment\"", 1,                                               \
     "Pending bytes given up: sub-granule pieces at the bound.")             \
  X (U64, dropped_nomem_bytes, COUNTER, "dropped_bytes_total",               \
     "reason=\"nomem\"", 1,                                                  \
     "Pending bytes given up: cancelled whole when a split had no memory.")  \
  X (U64, dropped_error_bytes, COUNTER, "dropped_bytes_total",               \
     "reason=\"error\"", 1,                                                  \
     "Pending bytes given up: failed to forward at the bound.")              \
  X (U64, dropped_breaker_bytes, COUNTER, "dropped_bytes_total", "reason=\"breaker\"", 1,\
     "Pending bytes given up: at max-extents while the circuit "             \
     "breaker was open.")                                                    \
  X (U64, dropped_small_bytes, COUNTER, "dropped_bytes_total", "reason=\"small\"", 1,\
     "Pending bytes given up: held by small= at a stop without "             \
     "state=.")                                                              \
  X (U64, dropped_stop_bytes, COUNTER, "dropped_bytes_total", "reason=\"stop\"", 1,\
     "Pending bytes given up: past the stop's bound (stop-timeout=).")       \
  X (U64, small_len, GAUGE, "small_len_bytes", NULL, 1,                      \
     "Pending extents shorter than this are held (small=); 0: none.")        \
  X (U64, joins, COUNTER, "joins_total", NULL, 1,                            \
     "Discard commands an explicit flush saved by joining extents "          \
     "across known-clean gaps.")                                             \
  X (U64, joined_clean_bytes, COUNTER, "joined_clean_bytes_total", NULL, 1,  \
     "Known-clean bytes discarded again by those joins.")                    \
  X (U64, pending_extents, GAUGE, "pending_extents", NULL, 1,                \
     "Pending discard extents.")                                             \
  X (U64, pending_bytes, GAUGE, "pending_bytes", NULL, 1,                    \
     "Bytes in pending discard extents.")                                    \
  X (U64, subgranule_bytes, GAUGE, "subgranule_bytes", NULL, 1,              \
     "Pending bytes in extents smaller than a granule.")                     \
  X (U64, inflight, GAUGE, "inflight", NULL, 1,                              \
     "Discards being sent now.")                                             \
  X (U64, inflight_bytes, GAUGE, "inflight_bytes", NULL, 1,                  \
     "Bytes in the discards being sent now.")                                \
  X (U64, write_waits, COUNTER, "write_waits_total", NULL, 1,                \
     "Writes that waited for a discard in flight.")                          \
  X (U64, forward_errors, COUNTER, "forward_errors_total", NULL, 1,          \
     "Discards that failed and stayed pending.")                             \
  X (U64, granularity, GAUGE, "granularity_bytes", NULL, 1,                  \
     "Discard granularity in bytes.")                                        \
  X (U64, max_discard, GAUGE, "max_discard_bytes", NULL, 1,                  \
     "Largest discard sent, in bytes.")                                      \
  X (U64, max_extents, GAUGE, "max_extents", NULL, 1,                        \
     "Bound on pending extents.")                                            \
  X (U64, memory_bytes, GAUGE, "memory_bytes", NULL, 1,                      \
     "Memory held by the extent map.")                                       \
  X (U64, backend_allocated_bytes, GAUGE, "backend_allocated_bytes", NULL, 1,\
     "Space the backend holds for the data (file blocks, RBD objects "       \
     "as rbd du counts them), refreshed at most every few seconds; 0 "       \
     "when the backend cannot tell.")                                        \
  X (U64, state_loaded_extents, GAUGE, "state_loaded_extents", NULL, 1,      \
     "Pending extents loaded from the state file at start.")                 \
  X (U64, state_loaded_bytes, GAUGE, "state_loaded_bytes", NULL, 1,          \
     "Bytes in the pending extents loaded from the state file at start.")    \
  X (U64, already_clean_bytes, COUNTER, "already_clean_bytes_total", NULL,   \
     1,                                                                      \
     "Trimmed bytes not sent again: the backend had discarded them and "     \
     "nothing had written them since.")                                      \
  X (U64, clean_extents, GAUGE, "clean_extents", NULL, 1,                    \
     "Ranges known clean (discarded, not written since).")                   \
  X (U64, clean_bytes, GAUGE, "clean_bytes", NULL, 1,                        \
     "Bytes known clean.")                                                   \
  X (U64, clean_memory_bytes, GAUGE, "clean_memory_bytes", NULL, 1,          \
     "Memory held by the known-clean map.")                                  \
  X (U64, clean_forgotten_bytes, COUNTER, "clean_forgotten_bytes_total",     \
     NULL, 1,                                                                \
     "Known-clean bytes forgotten at max-clean-extents (their next TRIM is"  \
     " sent).")                                                              \
  X (U64, max_clean_extents, GAUGE, "max_clean_extents", NULL, 1,            \
     "Bound on known-clean extents (0: off).")                               \
  X (U64, state_loaded_clean_extents, GAUGE, "state_loaded_clean_extents",   \
     NULL, 1,                                                                \
     "Known-clean extents loaded from the state file at start.")             \
  X (U64, state_loaded_clean_bytes, GAUGE, "state_loaded_clean_bytes", NULL, \
     1,                                                                      \
     "Bytes in the known-clean extents loaded from the state file at "       \
     "start.")                                                               \
  X (U64, discard_p50_us_64k, NONE, NULL, NULL, 1,                           \
     "Median latency of forwarded discards up to 64 KiB, in us.")            \
  X (U64, discard_p99_us_64k, GAUGE, "discard_p99_seconds", "size=\"64k\"",  \
     STATS_US,                                                               \
     "p99 latency of forwarded discards, by size class.")                    \
  X (U64, discard_p50_us_1m, NONE, NULL, NULL, 1,                            \
     "Median latency of forwarded discards up to 1 MiB, in us.")             \
  X (U64, discard_p99_us_1m, GAUGE, "discard_p99_seconds", "size=\"1m\"",    \
     STATS_US,                                                               \
     "p99 latency of forwarded discards up to 1 MiB.")                       \
  X (U64, discard_p50_us_16m, NONE, NULL, NULL, 1,                           \
     "Median latency of forwarded discards up to 16 MiB, in us.")            \
  X (U64, discard_p99_us_16m, GAUGE, "discard_p99_seconds", "size=\"16m\"",  \
     STATS_US,                                                               \
     "p99 latency of forwarded discards up to 16 MiB.")                      \
  X (U64, discard_p50_us_large, NONE, NULL, NULL, 1,                         \
     "Median latency of larger forwarded discards, in us.")                  \
  X (U64, discard_p99_us_large, GAUGE, "discard_p99_seconds",                \
     "size=\"large\"", STATS_US,                                             \
     "p99 latency of larger forwarded discards.")                            \
  X (U64, client_p99_us, GAUGE, "client_p99_seconds", "discard=\"no\"",      \
     STATS_US,                                                               \
     "p99 latency of client requests over 2 s, by whether a discard was in"  \
     " flight.")                                                             \
  X (U64, client_p99_discard_us, GAUGE, "client_p99_seconds",                \
     "discard=\"yes\"", STATS_US,                                            \
     "p99 latency of client requests beside a discard, over 2 s.")           \
  X (U64, client_p99_all_us, NONE, NULL, NULL, 1,                            \
     "p99 latency of all client requests over 2 s, in us.")                  \
  X (U64, client_requests_discard, NONE, NULL, NULL, 1,                      \
     "Client requests beside a discard, over 2 s.")                          \
  X (U64, client_requests, NONE, NULL, NULL, 1,                              \
     "Client requests, over 2 s.")                                           \
  X (U64, model_a_us, GAUGE, "model_seconds_per_command", NULL, STATS_US,    \
     "Fitted discard cost per command.")                                     \
  X (U64, model_b_us_per_gib, GAUGE, "model_seconds_per_byte", NULL,         \
     STATS_US_PER_GIB,                                                       \
     "Fitted discard cost per byte discarded.")                              \
  X (U64, stall_us, GAUGE, "stall_seconds", NULL, STATS_US,                  \
     "Client p99 with a discard in flight minus without.")                   \
  X (U64, budget_us, GAUGE, "budget_seconds", NULL, STATS_US,                \
     "budget= (0: no pacing).")                                              \
  X (U64, pace_bytes_per_s, GAUGE, "pace_bytes_per_second", NULL, 1,         \
     "Bytes forwarded in the last second.")                                  \
  X (U64, pace_commands_per_s, GAUGE, "pace_commands_per_second", NULL, 1,   \
     "Discards forwarded in the last second.")                               \
  X (U64, pace_max_len, NONE, NULL, NULL, 1,                                 \
     "The flusher's current largest discard, in bytes.")                     \
  X (U64, pace_gap_us, NONE, NULL, NULL, 1,                                  \
     "The flusher's current spacing between discards, in us.")               \
  X (U64, pace_rare_share_ppm, NONE, NULL, NULL, 1,                          \
     "RARE mode: the share of client requests allowed beside a discard, in"  \
     " ppm.")                                                                \
  X (U64, budget_overruns, COUNTER, "budget_overruns_total", NULL, 1,        \
     "Seconds whose client p99 beat the budget while discards ran.")         \
  X (U64, drain_eta_ms, GAUGE, "drain_eta_seconds", NULL, STATS_MS,          \
     "Time to forward the pending bytes at the current pace.")               \
  X (U64, forced_by_memory, COUNTER, "forced_by_memory_total", NULL, 1,      \
     "Discards forwarded past the budget near max-extents.")                 \
  X (U64, journal_on, GAUGE, "journal_on", NULL, 1,                          \
     "1 while the pending set's journal records changes "                    \
     "(journal=).")                                                          \
  X (U64, journal_records, COUNTER, "journal_records_total", NULL, 1,        \
     "Changes to the pending and known-clean sets recorded in the "          \
     "journal.")                                                             \
  X (U64, journal_commits, COUNTER, "journal_commits_total", NULL, 1,        \
     "Journal commits: records written out for FLUSHes and FUA writes "      \
     "(which share them).")                                                  \
  X (U64, journal_write_throughs, COUNTER, "journal_write_throughs_total",   \
     NULL, 1,                                                                \
     "Commits into the journal file's page cache before a write whose "     \
     "cancel they hold (a crash of the server alone replays no discard "    \
     "over it).")                                                            \
  X (U64, journal_syncs, COUNTER, "journal_syncs_total", NULL, 1,            \
     "fdatasyncs of the journal file of its own (none for a FLUSH where "    \
     "the backend's flush covers the journal).")                             \
  X (BOOL, journal_shared_flush, GAUGE, "journal_shared_flush", NULL, 1,     \
     "1 if the backend's flush makes the journal durable (a file on the "    \
     "same ext4 or XFS file system).")                                       \
  X (U64, journal_checkpoints, COUNTER, "journal_checkpoints_total", NULL, 1,\
     "State files written as the journal's checkpoint while "                \
     "serving.")                                                             \
  X (U64, journal_bytes, GAUGE, "journal_bytes", NULL, 1,                    \
     "Bytes of records in the journal file now.")                            \
  X (U64, journal_replayed_records, GAUGE, "journal_replayed_records", NULL, 1,\
     "Journal records replayed at this start.")                              \
  X (U64, journal_clean_unverified_bytes, GAUGE, "journal_clean_unverified_bytes", NULL, 1,\
     "Known-clean bytes at the crash that the backend no longer "            \
     "reports as holes.")                                                    \
  X (U64, low_water_bytes, GAUGE, "low_water_bytes", NULL, 1,                \
     "Backend free space below which everything forwardable goes "           \
     "at once (0: off).")                                                    \
  X (U64, backend_free_bytes, GAUGE, "backend_free_bytes", NULL, 1,          \
     "Backend free space at the last look (low-water=).")                    \
  X (U64, pressure, GAUGE, "pressure", NULL, 1,                              \
     "1 while the backend's free space is below low-water=.")                \
  X (U64, pressure_entered, COUNTER, "pressure_entered_total", NULL, 1,      \
     "Times the backend's free space went below low-water=.")                \
  X (U64, pressure_forwarded_bytes, COUNTER, "pressure_forwarded_bytes_total", NULL, 1,\
     "Bytes forwarded at once because of space pressure.")                   \
  X (STR, breaker_state, STATE, "breaker_state", "state", 1,                 \
     "The circuit breaker's state: closed, open or probing.")                \
  X (STR, breaker_reason, STATE, "breaker_reason", "reason", 1,              \
     "Why the circuit breaker last opened: none, errors or latency.")        \
  X (U64, breaker_next_probe_ms, GAUGE, "breaker_next_probe_seconds", NULL, STATS_MS,\
     "Time until the open circuit breaker's next probe (0 unless "           \
     "open).")                                                               \
  X (U64, breaker_opened, COUNTER, "breaker_opened_total", NULL, 1,          \
     "Times the circuit breaker opened.")                                    \
  X (U64, breaker_probes, COUNTER, "breaker_probes_total", NULL, 1,          \
     "Probe discards sent while the breaker was open.")                      \
  X (U64, breaker_errors, GAUGE, "breaker_consecutive_errors", NULL, 1,      \
     "Consecutive discard errors now.")                                      \
  X (BOOL, window_open, GAUGE, "window_open", NULL, 1,                       \
     "1 while forwarding windows let the flusher forward (or there "         \
     "are none).")                                                           \
  X (U64, window_wait_ms, GAUGE, "window_wait_seconds", NULL, STATS_MS,      \
     "Time until a forwarding window opens (0 while one is open).")          \
  X (BOOL, proof_supported, GAUGE, "proof_supported", NULL, 1,               \
     "1 where the backend can say what a discard freed.")                    \
  X (U64, proof_sample_ppm, NONE, NULL, NULL, 1,                             \
     "proof=: the share of discards checked, per million.")                  \
  X (U64, proof_checks, COUNTER, "proof_checks_total", NULL, 1,              \
     "Forwarded discards checked for freed space.")                          \
  X (U64, proof_checked_bytes, COUNTER, "proof_checked_bytes_total", NULL, 1,\
     "Bytes of forwarded discards checked for freed space.")                 \
  X (U64, proof_ineffective_bytes, COUNTER, "proof_ineffective_bytes_total", NULL, 1,\
     "Checked bytes the backend still held allocated after "                 \
     "acknowledging their discard.")                                         \
  X (U64, proof_skipped, COUNTER, "proof_skipped_total", NULL, 1,            \
     "Samples not checked (written since, queue full, backend "              \
     "error).")                                                              \
  X (U64, proof_adapted, COUNTER, "proof_adapted_total", NULL, 1,            \
     "Times proof-adapt raised the forwarding granularity.")                 \
  X (INT, backend_allocated_age_ms, GAUGE, "backend_allocated_age_seconds",  \
     NULL, STATS_MS,                                                         \
     "Age of backend_allocated_bytes where the backend reads it in the "    \
     "background (RBD); -1 when it never has, 0 where it is not read "      \
     "so.")                                                                  \
  X (INT, backend_allocated_error, GAUGE, "backend_allocated_error", NULL, 1,\
     "errno of the last failed reading of backend_allocated_bytes (a "      \
     "cluster outage); 0 when the last one worked.")                        \
  X (INT, backend_free_age_ms, GAUGE, "backend_free_age_seconds", NULL,      \
     STATS_MS,                                                               \
     "Age of backend_free_bytes where the backend reads it in the "         \
     "background (RBD); -1 when it never has, 0 where it is not read "      \
     "so.")                                                                  \
  X (INT, backend_free_error, GAUGE, "backend_free_error", NULL, 1,          \
     "errno of the last failed reading of backend_free_bytes; 0 when the "  \
     "last one worked.")                                                     \
  X (INT, last_error, GAUGE, "last_error", NULL, 1,                          \
     "errno of the last failed discard, 0 if none.")                         \
  X (BOOL, discard_supported, GAUGE, "discard_supported", NULL, 1,           \
     "1 while the backend accepts discards.")                                \
  X (BOOL, paused, GAUGE, "paused", NULL, 1,                                 \
     "1 while forwarding is paused.")                                        \
  X (PACE, pace_mode, NONE, NULL, NULL, 1,                                   \
     "What the flusher paces by: off, probe, fits, rare, idle or memory.")

#endif /* DISCARDCACHE_ENGINE_STATS_H */
