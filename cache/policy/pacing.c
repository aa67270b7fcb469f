/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the cost model and the pacing decision (see pacing.h). */
#include <config.h>

#include <string.h>

#include "arith.h"
#include "pacing.h"
#include "verify.h"

#define SUB (1u << PACE_HIST_SUB_BITS)
/* The largest discard the first probe sends, before anything is known. */
#define PROBE_BYTES (64 * 1024)
/* In RARE mode a discard stalls the few requests it overlaps beyond the
 * budget anyway, and those are past the p99 while they stay rare: so it
 * may grow until the per-byte part is this many times the per-command
 * part (bytes per affected request then reach 3/4 of what any size could
 * give), or until it takes RARE_STALL_FACTOR budgets, whichever is
 * larger.  The factor bounds what the affected requests see (the p99.9).
 */
#define RARE_BYTE_SHARE 3.0
#define RARE_STALL_FACTOR 10.0
/* No gap longer than this, so a bad window cannot stop forwarding. */
#define MAX_GAP_US 10000000
/* ... nor, while the overlap is only estimated, than this: the first
 * discards measure it.
 */
#define MAX_ESTIMATED_GAP_US 1000000
#define MAX_GAP_MULT 64.0

static unsigned
bucket_of (uint64_t us)
{
  unsigned msb;

  if (us < SUB)
    return (unsigned) us;
  if (us >= UINT64_C (1) << PACE_HIST_MAX_BITS)
    return PACE_HIST_BUCKETS - 1;
  msb = 63 - (unsigned) __builtin_clzll (us);
  return (msb - PACE_HIST_SUB_BITS + 1) * SUB
    + (unsigned) ((us >> (msb - PACE_HIST_SUB_BITS)) & (SUB - 1));
}

/* The largest value that lands in bucket i. */
static uint64_t
bucket_upper (unsigned i)
{
  unsigned shift;

  if (i < SUB)
    return i;
  shift = i / SUB - 1;
  return ((uint64_t) (SUB + i % SUB) << shift) + (UINT64_C (1) << shift) - 1;
}

void
pace_hist_add (struct pace_hist *h, uint64_t us)
{
  __atomic_fetch_add (&h->count[bucket_of (us)], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add (&h->total, 1, __ATOMIC_RELAXED);
}

uint64_t
pace_hist_total (const struct pace_hist *const *h, unsigned n)
{
  uint64_t total = 0;

  for (unsigned j = 0; j < n; j++)
    total += __atomic_load_n (&h[j]->total, __ATOMIC_RELAXED);
  return total;
}

uint64_t
pace_hist_quantile (const struct pace_hist *const *h, unsigned n, double p)
{
  uint64_t counts[PACE_HIST_BUCKETS] = { 0 };
  uint64_t total = 0, rank, seen = 0;

  /* Sum the buckets first: the total may run ahead of them meanwhile. */
  for (unsigned j = 0; j < n; j++)
    for (unsigned i = 0; i < PACE_HIST_BUCKETS; i++)
      counts[i] += __atomic_load_n (&h[j]->count[i], __ATOMIC_RELAXED);
  for (unsigned i = 0; i < PACE_HIST_BUCKETS; i++)
    total += counts[i];
  if (total == 0)
    return 0;
  rank = (uint64_t) (p * (double) total);
  if ((double) rank < p * (double) total || rank == 0)
    rank++;
  for (unsigned i = 0; i < PACE_HIST_BUCKETS; i++) {
    seen += counts[i];
    if (seen >= rank)
      return bucket_upper (i);
  }
  return bucket_upper (PACE_HIST_BUCKETS - 1);
}

void
pace_ring_add (struct pace_ring *r, uint64_t bytes, uint64_t us)
{
  r->bytes[r->next] = bytes;
  r->us[r->next] = us;
  r->next = (r->next + 1) % PACE_RING;
  if (r->n < PACE_RING)
    r->n++;
  r->max_bytes = MAX (r->max_bytes, bytes);
}

void
pace_fit (const struct pace_ring *r, struct pace_model *m)
{
  double mx = 0, my = 0, sxx = 0, sxy = 0, sx2 = 0, sxy0 = 0;

  *m = (struct pace_model) { .samples = r->n };
  if (r->n == 0)
    return;
  for (unsigned i = 0; i < r->n; i++) {
    mx += (double) r->bytes[i];
    my += (double) r->us[i];
  }
  mx /= r->n;
  my /= r->n;
  for (unsigned i = 0; i < r->n; i++) {
    double dx = (double) r->bytes[i] - mx;

    sxx += dx * dx;
    sxy += dx * ((double) r->us[i] - my);
    sx2 += (double) r->bytes[i] * (double) r->bytes[i];
    sxy0 += (double) r->bytes[i] * (double) r->us[i];
  }
  m->valid = true;
  /* Sizes all within a part per million of each other say nothing
   * about the per-byte cost: take it all as per command.
   */
  if (sxx <= 1e-12 * mx * mx * r->n || sxy <= 0) {
    m->a_us = my;
    return;
  }
  m->b_us_per_byte = sxy / sxx;
  m->a_us = my - m->b_us_per_byte * mx;
  if (m->a_us < 0) {
    m->a_us = 0;
    m->b_us_per_byte = sx2 > 0 ? sxy0 / sx2 : 0;
  }
}

void
pace_meter_model (const struct pace_meter *meter, struct pace_model *m)
{
  pace_fit (&meter->ring, m);
  if (!m->valid || meter->total_discards == 0)
    return;
  m->a_us = MIN (m->a_us,
                 (double) meter->total_us / (double) meter->total_discards);
  if (meter->total_bytes > 0)
    m->b_us_per_byte = MIN (m->b_us_per_byte,
                            (double) meter->total_us /
                            (double) meter->total_bytes);
}

double
pace_predict_us (const struct pace_model *m, uint64_t bytes)
{
  return m->a_us + m->b_us_per_byte * (double) bytes;
}

/* Clamp len to [granularity, limit], a multiple of granularity. */
static uint64_t
clamp_len (double len, uint64_t granularity, uint64_t limit)
{
  uint64_t n;

  if (!(len < (double) limit))
    return limit;
  n = round_down ((uint64_t) MAX (len, 0.0), granularity);
  return MAX (n, granularity);
}

/* The largest discard whose predicted latency is within the budget's
 * share, or 0 if even one granule is predicted above it.
 */
static uint64_t
fitting_len (const struct pace_inputs *in)
{
  double target = PACE_FIT_SHARE * (double) in->budget_us - in->model.a_us;
  double len;

  if (target <= 0)
    return 0;
  if (in->model.b_us_per_byte <= 0)
    return in->chunk_limit;
  len = target / in->model.b_us_per_byte;
  if (len < (double) in->granularity)
    return 0;
  return clamp_len (len, in->granularity, in->chunk_limit);
}

/* RARE: discards per second that keep the share of client requests
 * running beside one under PACE_RARE_SHARE, turned into a gap.  The
 * requests each discard overlaps are measured; until they are, they are
 * estimated from the client rate and the predicted latency, which
 * overestimates them (a client at a fixed queue depth stops sending
 * while its requests wait), with a shorter cap on the gap so that the
 * first discards go and measure.
 */
static uint64_t
rare_gap_us (const struct pace_inputs *in, double predicted_us)
{
  double rate, per_discard, allowed, gap, cap = MAX_GAP_US;

  if (in->client_requests == 0 || in->window_us == 0)
    return 0;
  rate = (double) in->client_requests * 1e6 / (double) in->window_us;
  per_discard = in->overlap_per_discard;
  if (per_discard <= 0) {
    per_discard = rate * predicted_us / 1e6 + 1;
    cap = MAX_ESTIMATED_GAP_US;
  }
  allowed = (in->rare_share > 0 ? in->rare_share : PACE_RARE_SHARE)
    * rate / per_discard;
  gap = 1e6 / allowed - predicted_us;
  if (gap <= 0)
    return 0;
  return gap > cap ? (uint64_t) cap : (uint64_t) gap;
}

/* Every length decided is a whole number of granules, at most the
 * chunk limit: the flusher sends it as one aligned discard.
 */
static void
verify_decision (const struct pace_inputs *in, const struct pace_decision *d)
{
  VERIFY3U (d->max_len, >=, in->granularity);
  VERIFY3U (d->max_len, <=, in->chunk_limit);
  VERIFY3U (d->max_len % in->granularity, ==, 0);
}

static void decide (const struct pace_inputs *in, struct pace_decision *d);

void
pace_decide (const struct pace_inputs *in, struct pace_decision *d)
{
  /* policy_chunk_limit's: a whole number of granules, at least one. */
  VERIFY (is_power_of_2 (in->granularity));
  VERIFY3U (in->chunk_limit % in->granularity, ==, 0);
  VERIFY3U (in->chunk_limit, >=, in->granularity);
  decide (in, d);
  verify_decision (in, d);
}

static void
decide (const struct pace_inputs *in, struct pace_decision *d)
{
  const struct pace_model *m = &in->model;
  uint64_t cap, fit;
  double gap;

  if (!m->valid) {
    d->mode = PACE_PROBE;
    d->max_len = clamp_len (PROBE_BYTES, in->granularity, in->chunk_limit);
    d->gap_us = 0;
    d->predicted_us = 0;
    return;
  }
  cap = clamp_len ((double) in->max_measured_bytes * PACE_EXPLORE_FACTOR,
                   in->granularity, in->chunk_limit);
  fit = fitting_len (in);
  if (fit && (in->stall_us < 0 || (uint64_t) in->stall_us <= in->budget_us)) {
    d->mode = PACE_FITS;
    d->max_len = MIN (fit, cap);
    d->predicted_us = pace_predict_us (m, d->max_len);
    gap = d->predicted_us * in->gap_mult;
    d->gap_us = gap > MAX_GAP_US ? MAX_GAP_US : (uint64_t) gap;
    return;
  }
  d->mode = PACE_RARE;
  if (m->b_us_per_byte > 0)
    d->max_len = clamp_len (MAX (RARE_BYTE_SHARE * m->a_us,
                                 RARE_STALL_FACTOR * (double) in->budget_us
                                 - m->a_us) / m->b_us_per_byte,
                            in->granularity, in->chunk_limit);
  else
    d->max_len = in->chunk_limit;
  d->max_len = MIN (d->max_len, cap);
  d->predicted_us = pace_predict_us (m, d->max_len);
  d->gap_us = rare_gap_us (in, d->predicted_us);
}

double
pace_adapt (double gap_mult, int64_t stall_us, uint64_t budget_us)
{
  if (stall_us < 0)
    return gap_mult;
  if ((uint64_t) stall_us > budget_us)
    return MIN (MAX (gap_mult * 2, 1.0), MAX_GAP_MULT);
  if ((uint64_t) stall_us * 2 < budget_us) {
    gap_mult *= 0.75;
    return gap_mult < 0.05 ? 0 : gap_mult;
  }
  return gap_mult;
}

double
pace_adapt_share (double share, int64_t extra_us, uint64_t budget_us)
{
  if (extra_us < 0)
    return share;
  if ((uint64_t) extra_us * 5 > budget_us * 4)
    return MAX (share / 2, PACE_RARE_SHARE_MIN);
  if ((uint64_t) extra_us * 2 < budget_us)
    return MIN (share * 1.25, PACE_RARE_SHARE_MAX);
  return share;
}

uint64_t
pace_drain_eta_ms (uint64_t pending_bytes, uint64_t bytes_per_s)
{
  if (pending_bytes == 0 || bytes_per_s == 0)
    return 0;
  return (uint64_t) ((double) pending_bytes * 1000 / (double) bytes_per_s);
}

void
pace_meter_init (struct pace_meter *m, uint64_t now_ns)
{
  memset (m, 0, sizeof *m);
  m->window_start_ns[0] = m->window_start_ns[1] = now_ns;
  m->stall_us = -1;
  m->gap_mult = 1;
  m->rare_share = PACE_RARE_SHARE;
}

void
pace_meter_client (struct pace_meter *m, uint64_t us, bool overlapped)
{
  unsigned cur = __atomic_load_n (&m->cur, __ATOMIC_RELAXED);

  pace_hist_add (&m->client[cur][overlapped], us);
}

static unsigned
size_class (uint64_t bytes)
{
  if (bytes <= 64 * 1024)
    return 0;
  if (bytes <= 1024 * 1024)
    return 1;
  if (bytes <= 16 * 1024 * 1024)
    return 2;
  return 3;
}

void
pace_meter_discard (struct pace_meter *m, uint64_t bytes, uint64_t us)
{
  pace_hist_add (&m->discard[size_class (bytes)], us);
  pace_ring_add (&m->ring, bytes, us);
  m->total_us += us;
  m->total_bytes += bytes;
  m->total_discards++;
  m->discards[m->cur]++;
  m->discard_bytes[m->cur] += bytes;
}

uint64_t
pace_meter_discard_quantile (const struct pace_meter *m, unsigned c, double p)
{
  const struct pace_hist *h = &m->discard[c];

  return pace_hist_quantile (&h, 1, p);
}

bool
pace_meter_rotate (struct pace_meter *m, uint64_t now_ns, uint64_t budget_us,
                   enum pace_mode mode)
{
  unsigned cur = m->cur, old = cur ^ 1;
  const struct pace_hist *with[2] = { &m->client[0][1], &m->client[1][1] };
  const struct pace_hist *without[2] = { &m->client[0][0], &m->client[1][0] };
  const struct pace_hist *all[4] = { with[0], with[1], without[0], without[1] };
  uint64_t n_with, n_without, cur_ns;
  int64_t extra = -1;

  cur_ns = now_ns - m->window_start_ns[cur];
  if (cur_ns < PACE_WINDOW_NS)
    return false;
  n_with = pace_hist_total (with, 2);
  n_without = pace_hist_total (without, 2);
  m->client_p99_us = pace_hist_quantile (without, 2, 0.99);
  m->client_p99_discard_us = pace_hist_quantile (with, 2, 0.99);
  m->client_p99_all_us = pace_hist_quantile (all, 4, 0.99);
  m->stall_us = -1;
  if (n_with >= PACE_MIN_TAIL && n_without >= PACE_MIN_TAIL)
    m->stall_us = m->client_p99_discard_us > m->client_p99_us
      ? (int64_t) (m->client_p99_discard_us - m->client_p99_us) : 0;
  m->win_us = (now_ns - m->window_start_ns[old]) / 1000;
  m->win_requests = n_with + n_without;
  m->win_overlapped = n_with;
  m->win_discards = m->discards[0] + m->discards[1];
  if (m->win_discards) {
    double sample = (double) n_with / (double) m->win_discards;

    /* Smoothed: a discard that ends early in a window has its overlaps
     * counted partly in the window before.
     */
    m->overlap_per_discard = m->overlap_per_discard > 0
      ? (m->overlap_per_discard + sample) / 2 : sample;
  }
  m->bytes_per_s = m->discard_bytes[cur] * PACE_WINDOW_NS / cur_ns;
  m->commands_per_s = m->discards[cur] * PACE_WINDOW_NS / cur_ns;
  if (m->win_discards && n_without >= PACE_MIN_TAIL)
    extra = m->client_p99_all_us > m->client_p99_us
      ? (int64_t) (m->client_p99_all_us - m->client_p99_us) : 0;
  if (budget_us && extra > (int64_t) budget_us)
    m->overruns++;
  if (mode == PACE_FITS)
    m->gap_mult = pace_adapt (m->gap_mult, m->stall_us, budget_us);
  if (mode == PACE_RARE)
    m->rare_share = pace_adapt_share (m->rare_share, extra, budget_us);
  /* The older window is emptied and refilled from now on.  A request
   * that read cur just before the flip may land in it while it is
   * cleared: one sample lost, which no percentile notices.
   */
  memset (&m->client[old], 0, sizeof m->client[old]);
  m->discards[old] = m->discard_bytes[old] = 0;
  m->window_start_ns[old] = now_ns;
  __atomic_store_n (&m->cur, old, __ATOMIC_RELAXED);
  return true;
}

void
pace_meter_inputs (const struct pace_meter *m, struct pace_inputs *in)
{
  pace_meter_model (m, &in->model);
  in->max_measured_bytes = m->ring.max_bytes;
  in->stall_us = m->stall_us;
  in->window_us = m->win_us;
  in->client_requests = m->win_requests;
  in->client_overlapped = m->win_overlapped;
  in->discards = m->win_discards;
  in->overlap_per_discard = m->overlap_per_discard;
  in->gap_mult = m->gap_mult;
  in->rare_share = m->rare_share;
}
