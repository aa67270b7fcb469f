/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: adaptive pacing (budget=).  Measurements (latency
 * histograms, a ring of recent discard samples), the cost model fitted
 * to them, and the flusher's decision: how large a discard to send and
 * how long to wait before the next one.  Plain structs and pure
 * functions, so the model and the decisions are tested on synthetic
 * samples; the engine owns one struct pace_meter and feeds it.
 */
#ifndef DISCARDCACHE_PACING_H
#define DISCARDCACHE_PACING_H

#include <stdbool.h>
#include <stdint.h>

/* How the flusher paces forwarding (budget=), one name each: off (no
 * budget=), probe, fits, rare (pace_decide's modes: no cost model yet;
 * each discard fits the budget; it does not, so discards run rarely),
 * idle (clients are quiet: no spacing) and memory (near max-extents,
 * forwarding past the budget).  PACE_OFF is 0: a zeroed engine is off.
 */
#define PACE_MODES(X)                                                        \
  X (OFF, off) X (PROBE, probe) X (FITS, fits) X (RARE, rare)                \
  X (IDLE, idle) X (MEMORY, memory)

enum pace_mode {
#define PACE_MODE_ENUM(id, name) PACE_##id,
  PACE_MODES (PACE_MODE_ENUM)
#undef PACE_MODE_ENUM
};

/* The mode's name, as the statistics show it. */
static inline const char *
pace_mode_name (enum pace_mode m)
{
  switch (m) {
#define PACE_MODE_NAME(id, name) case PACE_##id: return #name;
    PACE_MODES (PACE_MODE_NAME)
#undef PACE_MODE_NAME
  }
  return "?";
}

/* Latency histogram in microseconds: 16 sub-buckets per power of two
 * (6% resolution), up to 2^37 us (longer ones count as that).  Fixed
 * size, updated with atomic increments: recording never allocates nor
 * takes a lock.
 */
#define PACE_HIST_SUB_BITS 4
#define PACE_HIST_MAX_BITS 37
#define PACE_HIST_BUCKETS \
  ((PACE_HIST_MAX_BITS - PACE_HIST_SUB_BITS + 1) << PACE_HIST_SUB_BITS)

struct pace_hist {
  uint32_t count[PACE_HIST_BUCKETS];
  uint64_t total;
};

/* Record one latency (us), safe against concurrent callers. */
extern void pace_hist_add (struct pace_hist *h, uint64_t us)
  __attribute__ ((nonnull (1)));

/* The p-th quantile (0 < p < 1) of the union of n histograms, in us
 * (the upper edge of its bucket); 0 if they are empty.
 */
extern uint64_t pace_hist_quantile (const struct pace_hist *const *h,
                                    unsigned n, double p)
  __attribute__ ((nonnull (1)));

/* Samples in the union of n histograms. */
extern uint64_t pace_hist_total (const struct pace_hist *const *h, unsigned n)
  __attribute__ ((nonnull (1)));

/* The last PACE_RING forwarded discards: size and latency. */
#define PACE_RING 64

struct pace_ring {
  uint64_t bytes[PACE_RING];
  uint64_t us[PACE_RING];
  unsigned n;                       /* valid samples, up to PACE_RING */
  unsigned next;                    /* where the next one goes */
  uint64_t max_bytes;               /* largest discard ever measured */
};

extern void pace_ring_add (struct pace_ring *r, uint64_t bytes, uint64_t us)
  __attribute__ ((nonnull (1)));

/* Cost model of one discard on this backend: latency = a + b * bytes. */
struct pace_model {
  bool valid;                       /* at least one sample */
  double a_us;                      /* per command, >= 0 */
  double b_us_per_byte;             /* per byte, >= 0 */
  unsigned samples;
};

/* Least-squares fit over the ring.  With no spread in sizes (or a
 * negative slope) the cost is taken as per command (b = 0); a negative
 * intercept is taken as per byte (a = 0).
 */
extern void pace_fit (const struct pace_ring *r, struct pace_model *m)
  __attribute__ ((nonnull (1, 2)));

/* Predicted latency of a discard of bytes, in us. */
extern double pace_predict_us (const struct pace_model *m, uint64_t bytes)
  __attribute__ ((nonnull (1)));

/* What the decision looks at: the budget, the model, and the last
 * measuring window's client requests.
 */
struct pace_inputs {
  uint64_t budget_us;
  struct pace_model model;
  uint64_t max_measured_bytes;      /* pace_ring.max_bytes */
  int64_t stall_us;                 /* client p99 with - without discard; -1 unknown */
  uint64_t granularity;
  uint64_t chunk_limit;
  uint64_t window_us;               /* length of the window below */
  uint64_t client_requests;         /* client requests completed in it */
  uint64_t client_overlapped;       /* ... of which ran beside a discard */
  uint64_t discards;                /* discard commands completed in it */
  double overlap_per_discard;       /* client requests one overlaps; 0 unknown */
  double gap_mult;                  /* pace_adapt's state */
  double rare_share;                /* pace_adapt_share's state; 0: default */
};

struct pace_decision {
  enum pace_mode mode;              /* PROBE, FITS or RARE (engine-stats.h) */
  uint64_t max_len;                 /* largest discard to send now */
  uint64_t gap_us;                  /* wait after it before the next */
  double predicted_us;              /* the model's latency for max_len */
};

/* Share of client requests that may overlap a discard in RARE mode, to
 * start with: under a third of the 1% a p99 can hide, the rest being the
 * error of a count over short windows on a busy machine.
 * pace_adapt_share moves it between MIN and MAX by what the p99 of all
 * requests shows (requests beside a discard are not all slowed by all of
 * it).  MAX stays at half of 1%: a controller that hunts for the edge
 * where the p99 is made of requests beside a discard crosses it often
 * enough to show over a whole run (tried: with 5%, fio saw a p99 of
 * 11 ms where the engine's 1 s windows saw under 2 ms over the baseline;
 * with 0.8% still 10.8 ms against 5.0 once in three runs).
 */
#define PACE_RARE_SHARE 0.003
#define PACE_RARE_SHARE_MIN 0.0005
#define PACE_RARE_SHARE_MAX 0.005
/* Discards in FITS mode aim at this share of the budget. */
#define PACE_FIT_SHARE 0.8
/* The model is not extrapolated further than this past the largest
 * discard measured: sizes grow step by step while it learns.
 */
#define PACE_EXPLORE_FACTOR 4

extern void pace_decide (const struct pace_inputs *in,
                         struct pace_decision *d)
  __attribute__ ((nonnull (1, 2)));

/* End of a measuring window in FITS mode: the spacing multiplier grows
 * (x2, at least 1) when the measured stall was over the budget and
 * shrinks (x3/4, to 0) when it was under half of it.  Returns the new one.
 */
extern double pace_adapt (double gap_mult, int64_t stall_us,
                          uint64_t budget_us);

/* End of a measuring window in RARE mode: extra_us is how far the p99 of
 * all client requests was above the p99 of those without a discard
 * beside them (-1: not known).  Over 4/5 of the budget the share halves,
 * under half of it it grows by a quarter.  Returns the new share.
 */
extern double pace_adapt_share (double share, int64_t extra_us,
                                uint64_t budget_us);

/* Time to forward pending_bytes at bytes_per_s, in ms (0 if either is
 * 0: nothing to drain, or no pace measured yet).
 */
extern uint64_t pace_drain_eta_ms (uint64_t pending_bytes,
                                   uint64_t bytes_per_s);

/* Discard latency size classes for the statistics: up to 64 KiB, 1 MiB,
 * 16 MiB, and larger.
 */
#define PACE_CLASSES 4

/* Seconds of one measuring window; decisions look at the last two. */
#define PACE_WINDOW_NS UINT64_C (1000000000)
/* Fewer client requests than this on either side leave the stall unknown. */
#define PACE_MIN_TAIL 50

/* Everything the engine measures for pacing.  The client histograms
 * are written without the engine lock (atomics); the rest under it.
 */
struct pace_meter {
  struct pace_hist client[2][2];    /* [window][ran beside a discard] */
  unsigned cur;                     /* the window being filled (atomic) */
  struct pace_hist discard[PACE_CLASSES];  /* since start, by size class */
  struct pace_ring ring;
  uint64_t total_us, total_bytes, total_discards;  /* since start */
  uint64_t window_start_ns[2];
  uint64_t discards[2];             /* per window: commands, bytes */
  uint64_t discard_bytes[2];
  /* Results of the last pace_meter_rotate. */
  int64_t stall_us;                 /* -1: not known */
  uint64_t client_p99_us;           /* without a discard in flight */
  uint64_t client_p99_discard_us;   /* with one */
  uint64_t client_p99_all_us;       /* all of them */
  uint64_t win_us, win_requests, win_overlapped, win_discards;
  uint64_t bytes_per_s, commands_per_s;
  double overlap_per_discard;       /* smoothed over windows; 0 unknown */
  double gap_mult;
  double rare_share;
  uint64_t overruns;                /* windows whose p99 beat the budget */
};

/* The cost model the engine uses: the ring's fit (pace_fit), bounded by
 * everything measured since start, so that a few slow samples in the
 * ring cannot make it absurd: a per-command cost above the mean latency
 * of all discards, or a per-byte cost above their total time over their
 * total bytes (both bounds hold for any true a, b >= 0).
 */
extern void pace_meter_model (const struct pace_meter *meter,
                              struct pace_model *m)
  __attribute__ ((nonnull (1, 2)));

/* Start measuring at now_ns. */
extern void pace_meter_init (struct pace_meter *m, uint64_t now_ns)
  __attribute__ ((nonnull (1)));

/* A client request of us microseconds ended; overlapped: a discard was
 * in flight at some point while it ran.  Lock-free.
 */
extern void pace_meter_client (struct pace_meter *m, uint64_t us,
                               bool overlapped)
  __attribute__ ((nonnull (1)));

/* A discard of bytes took us microseconds. */
extern void pace_meter_discard (struct pace_meter *m, uint64_t bytes,
                                uint64_t us)
  __attribute__ ((nonnull (1)));

/* The p-th quantile of discard latency in size class c (0 if none). */
extern uint64_t pace_meter_discard_quantile (const struct pace_meter *m,
                                             unsigned c, double p)
  __attribute__ ((nonnull (1)));

/* Close the window if it is PACE_WINDOW_NS old: compute the stall and
 * the pace over the last two windows, count an overrun (discards ran and
 * the p99 of all client requests was more than budget_us above the p99
 * of those without a discard beside them), adapt the FITS multiplier or
 * the RARE share when the flusher was in that mode, start a new window.
 * Returns whether it rotated.
 */
extern bool pace_meter_rotate (struct pace_meter *m, uint64_t now_ns,
                               uint64_t budget_us, enum pace_mode mode)
  __attribute__ ((nonnull (1)));

/* Fill the measured part of in (model, stall, window counts). */
extern void pace_meter_inputs (const struct pace_meter *m,
                               struct pace_inputs *in)
  __attribute__ ((nonnull (1, 2)));

#endif /* DISCARDCACHE_PACING_H */
