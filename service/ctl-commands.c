/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what each control request does (protocol in
 * ctl-proto.h).  Every engine call returns before anything is written
 * to the client, so the engine's lock is never held across a send.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl-internal.h"
#include "engine.h"
#include "json-flat.h"
#include "keys.h"
#include "volume.h"
#include "log.h"
#include "stats.h"

/* How often a waiting flush looks at the client and reports progress. */
#define PROGRESS_INTERVAL_MS 250
/* Extents copied under the lock at a time by dump. */
#define DUMP_BATCH 4096

int
ctl_hello (struct ctl_client *c)
{
  FILE *fp = ctl_out_open (c);

  if (fp == NULL)
    return -1;
  fprintf (fp, "{\"ok\":true,\"hello\":\"discardcache\",\"protocol\":%d,"
           "\"version\":\"%s\",\"pid\":%d,\"max_line\":%d,\"backend\":",
           CTL_PROTOCOL_VERSION, PACKAGE_VERSION, (int) getpid (),
           CTL_MAX_LINE);
  jf_write_string (fp, engine_identity (c->s->e)->name);
  fputs ("}\n", fp);
  return ctl_out_send (c);
}

/* The statistics are exactly the statsfile's JSON, with "ok" first. */
static int
do_stats (struct ctl_client *c)
{
  struct volume_stats st;
  char *json = NULL;
  size_t len = 0;
  FILE *mem = open_memstream (&json, &len);
  FILE *fp;

  if (mem == NULL)
    return ctl_send_error (c, "out of memory");
  volume_get_stats (c->s->v, &st);
  stats_write_json (&st, mem);
  if (fclose (mem) != 0 || len < 2 || (fp = ctl_out_open (c)) == NULL) {
    free (json);
    return ctl_send_error (c, "out of memory");
  }
  fprintf (fp, "{\"ok\":true,%s", json + 1);
  free (json);
  return ctl_out_send (c);
}

/* The numbers of a flush under way, by the reply's keys. */
static void
progress_numbers (const struct engine_flush_progress *p,
                  uint64_t v[CTL_FLUSH_NKEYS])
{
  v[CTL_FLUSH_KEY_forwarded] = p->forwarded;
  v[CTL_FLUSH_KEY_forwarded_bytes] = p->forwarded_bytes;
  v[CTL_FLUSH_KEY_total_bytes] = p->total_bytes;
  v[CTL_FLUSH_KEY_elapsed_ms] = p->elapsed_ms;
}

static int
send_progress (struct ctl_client *c, const struct engine_flush_progress *p)
{
  uint64_t v[CTL_FLUSH_NKEYS] = { 0 };
  FILE *fp = ctl_out_open (c);

  if (fp == NULL)
    return -1;
  progress_numbers (p, v);
  ctl_flush_write (fp, CTL_FLUSH_PROGRESS, v);
  return ctl_out_send (c);
}

static int
flush_failed (struct ctl_client *c, int err)
{
  char msg[256];

  if (err == ESHUTDOWN)
    return ctl_send_error (c, "the server is stopping");
  if (err == EOPNOTSUPP)
    return ctl_send_error (c, "the backend does not support discard: "
                           "forwarding is off");
  snprintf (msg, sizeof msg, "a discard failed (%s): what is left stays "
            "pending and is retried", strerror (err));
  return ctl_send_error (c, msg);
}

static int
flush_done (struct ctl_client *c, const struct engine_flush_progress *p)
{
  struct engine_stats st;
  uint64_t v[CTL_FLUSH_NKEYS];
  FILE *fp = ctl_out_open (c);

  if (fp == NULL)
    return -1;
  engine_get_stats (c->s->e, &st);
  progress_numbers (p, v);
  v[CTL_FLUSH_KEY_pending_extents] = st.pending_extents;
  v[CTL_FLUSH_KEY_pending_bytes] = st.pending_bytes;
  v[CTL_FLUSH_KEY_subgranule_bytes] = st.subgranule_bytes;
  ctl_flush_write (fp, CTL_FLUSH_DONE, v);
  return ctl_out_send (c);
}

/* The flusher does the work; this thread only watches it, so other
 * clients are served meanwhile and a stop is noticed within an interval.
 */
static int
do_flush (struct ctl_client *c, const struct ctl_request *req)
{
  struct engine_flush f;
  struct engine_flush_progress p;
  FILE *fp;
  int r;

  /* Thin mode's reserve first: its runs join what this flush forwards. */
  if (req->reserve && volume_release_reserve (c->s->v) == -1)
    return ctl_send_error (c, "flush --reserve: the reuse reserve could not "
                           "be handed to the engine (see the server's log)");
  engine_flush_begin (c->s->e, &f);
  if (!req->wait) {
    if ((fp = ctl_out_open (c)) == NULL)
      return -1;
    ctl_flush_write (fp, CTL_FLUSH_STARTED, (const uint64_t[CTL_FLUSH_NKEYS])
                     { [CTL_FLUSH_KEY_total_bytes] = f.total_bytes });
    return ctl_out_send (c);
  }
  while ((r = engine_flush_wait (c->s->e, &f, PROGRESS_INTERVAL_MS, &p)) == 0) {
    if (ctl_stopping (c->s))
      return flush_failed (c, ESHUTDOWN);
    if (ctl_client_gone (c))
      return -1;
    if (req->progress && send_progress (c, &p) == -1)
      return -1;
  }
  return r == 1 ? flush_done (c, &p) : flush_failed (c, errno);
}

static void
put_extents (FILE *fp, const struct extent *x, size_t n, uint32_t now)
{
  for (size_t i = 0; i < n; i++)
    fprintf (fp, "{\"offset\":%" PRIu64 ",\"length\":%" PRIu64
             ",\"age_ms\":%" PRIu32 "}\n", x[i].offset, x[i].length,
             now >= x[i].time ? now - x[i].time : 0);
}

/* Batches taken under the lock, each sent without it. */
static int
do_dump (struct ctl_client *c)
{
  struct extent *batch = malloc (DUMP_BATCH * sizeof *batch);
  uint64_t from = 0, count = 0, bytes = 0;
  uint32_t now;
  size_t n;
  FILE *fp;

  if (batch == NULL)
    return ctl_send_error (c, "out of memory");
  while ((n = engine_dump_batch (c->s->e, from, batch, DUMP_BATCH, &now)) > 0) {
    if (ctl_stopping (c->s) || (fp = ctl_out_open (c)) == NULL)
      break;
    put_extents (fp, batch, n, now);
    if (ctl_out_send (c) == -1)
      break;
    for (size_t i = 0; i < n; i++)
      bytes += batch[i].length;
    count += n;
    from = batch[n - 1].offset + batch[n - 1].length;
  }
  free (batch);
  if (n > 0)
    return -1;
  if ((fp = ctl_out_open (c)) == NULL)
    return -1;
  fprintf (fp, "{\"ok\":true,\"dump\":\"done\",\"extents\":%" PRIu64
           ",\"bytes\":%" PRIu64 "}\n", count, bytes);
  return ctl_out_send (c);
}

/* dump --map: the thin slot map, one run of slots a line (a line a
 * slot would make a 1 GiB disk of 4 KiB slots 262,144 lines).
 */
static int
do_dump_map (struct ctl_client *c)
{
  struct volume_map_run *runs = malloc (DUMP_BATCH * sizeof *runs);
  uint64_t from = 0, count = 0, slots = 0;
  struct volume_stats st;
  ssize_t n = 0;
  FILE *fp;

  volume_get_stats (c->s->v, &st);
  if (!st.thin) {
    free (runs);
    return ctl_send_error (c, "dump --map: the server is not in thin mode "
                           "(thin=on)");
  }
  if (runs == NULL)
    return ctl_send_error (c, "out of memory");
  while ((n = volume_dump_map_batch (c->s->v, from, runs, DUMP_BATCH)) > 0) {
    if (ctl_stopping (c->s) || (fp = ctl_out_open (c)) == NULL)
      break;
    for (ssize_t i = 0; i < n; i++) {
      fprintf (fp, "{\"offset\":%" PRIu64 ",\"physical\":%" PRIu64
               ",\"length\":%" PRIu64 "}\n", runs[i].logical * st.th.slot,
               runs[i].physical * st.th.slot, runs[i].length * st.th.slot);
      slots += runs[i].length;
    }
    if (ctl_out_send (c) == -1)
      break;
    count += n;
    from = runs[n - 1].logical + runs[n - 1].length;
  }
  free (runs);
  if (n > 0 || (fp = ctl_out_open (c)) == NULL)
    return -1;
  fprintf (fp, "{\"ok\":true,\"dump\":\"done\",\"runs\":%" PRIu64
           ",\"slots\":%" PRIu64 ",\"slot\":%" PRIu64 "}\n",
           count, slots, st.th.slot);
  return ctl_out_send (c);
}

static int
do_pause (struct ctl_client *c, bool paused)
{
  FILE *fp;

  engine_pause (c->s->e, paused);
  if ((fp = ctl_out_open (c)) == NULL)
    return -1;
  fprintf (fp, "{\"ok\":true,\"paused\":%s}\n", paused ? "true" : "false");
  return ctl_out_send (c);
}

/* Every pair is checked against the table of keys (keys.h) before any
 * is applied, so a bad one changes nothing; the runtime keys are all
 * the engine's.
 */
static int
do_set (struct ctl_client *c, const struct ctl_request *req)
{
  char msg[512];
  FILE *fp;

  if (service_keys_check_runtime (req->keys, req->values, req->nset, msg,
                                  sizeof msg) == -1)
    return ctl_send_error (c, msg);
  for (size_t i = 0; i < req->nset; i++)
    if (service_key_find (req->keys[i])->layer != SERVICE_LAYER_ENGINE ||
        engine_set (c->s->e, req->keys[i], req->values[i]) == -1) {
      snprintf (msg, sizeof msg, "set %s=%s: internal error: checked, but "
                "not applied (the pairs before it were)", req->keys[i],
                req->values[i]);
      return ctl_send_error (c, msg);
    }
  if ((fp = ctl_out_open (c)) == NULL)
    return -1;
  for (size_t i = 0; i < req->nset; i++) {
    fputs (i + 1 < req->nset ? "{\"set\":" : "{\"ok\":true,\"set\":", fp);
    jf_write_string (fp, req->keys[i]);
    fputs (",\"value\":", fp);
    jf_write_string (fp, req->values[i]);
    fputs ("}\n", fp);
  }
  return ctl_out_send (c);
}

/* Invariant 9 on request: every TRIM reaches the backend again until
 * the backend has discarded it anew.
 */
static int
do_forget_clean (struct ctl_client *c)
{
  struct engine_stats st;
  uint64_t extents, bytes;
  FILE *fp;

  engine_forget_clean (c->s->e, &extents, &bytes);
  engine_get_stats (c->s->e, &st);
  if ((fp = ctl_out_open (c)) == NULL)
    return -1;
  fprintf (fp, "{\"ok\":true,\"forgot_extents\":%" PRIu64
           ",\"forgot_bytes\":%" PRIu64 ",\"max_clean_extents\":%" PRIu64 "}\n",
           extents, bytes, st.max_clean_extents);
  return ctl_out_send (c);
}

static int
do_help (struct ctl_client *c)
{
  FILE *fp = ctl_out_open (c);

  if (fp == NULL)
    return -1;
  fprintf (fp, "{\"ok\":true,\"protocol\":%d,\"commands\":\"%s\"}\n",
           CTL_PROTOCOL_VERSION, CTL_COMMANDS);
  return ctl_out_send (c);
}

int
ctl_handle_line (struct ctl_client *c, char *line, size_t len)
{
  struct ctl_request req;
  char err[512];

  if (ctl_parse_request (line, len, &req, err, sizeof err) == -1) {
    dc_debug ("ctl: bad request: %s", err);
    return ctl_send_error (c, err);
  }
  switch (req.command) {
  case CTL_STATS: return do_stats (c);
  case CTL_FLUSH: return do_flush (c, &req);
  case CTL_DUMP: return req.map ? do_dump_map (c) : do_dump (c);
  case CTL_PAUSE: return do_pause (c, true);
  case CTL_RESUME: return do_pause (c, false);
  case CTL_SET: return do_set (c, &req);
  case CTL_FORGET_CLEAN: return do_forget_clean (c);
  case CTL_HELP: return do_help (c);
  }
  return ctl_send_error (c, "internal error: unhandled command");
}
