/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the RBD backend's space (rbd-internal.h): what the image
 * holds (backend_allocated), what its pool can still store and whether
 * the OSD map flags it full (the free_space op, for low-water=).
 *
 * Each costs a walk of the image or round trips to the monitor, which
 * during an outage take up to rbd-timeout= each: they were computed on
 * the reader's thread, and `discardctl stats` waited 16 to 26 s while an
 * OSD was down.  So one thread of the backend's reads them, each on its
 * interval and only while someone asks for it, and readers get the last
 * reading at once (invariant 14: the control socket never waits on the
 * backend).  A reading that fails keeps the last figures; its error is
 * logged once, and again when it works again.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arith.h"
#include "clock.h"
#include "json-flat.h"
#include "log.h"
#include "rbd-internal.h"

/* Report a reading's failure, unless the last one failed too (one
 * message per outage, not one a second).  errno is kept.
 */
#define space_error(h, ...) \
  do { \
    if (!(h)->space.quiet) \
      dc_error (__VA_ARGS__); \
  } while (0)

static int
add_extent (uint64_t offset, size_t length, int exists, void *opaque)
{
  (void) offset;
  if (exists)
    *(uint64_t *) opaque += length;
  return 0;
}

/* What `rbd du` counts: with a valid fast-diff object map, whole objects
 * from the map (no I/O); without, the objects listed.
 */
static int
compute_allocated (struct rbd_backend *h, uint64_t v[2])
{
  uint64_t flags = 0, sum = 0;
  bool whole = (h->features & RBD_FEATURE_FAST_DIFF) &&
               h->lib->rbd_get_flags (h->image, &flags) == 0 &&
               !(flags & RBD_FLAG_FAST_DIFF_INVALID);
  int r = h->lib->rbd_diff_iterate2 (h->image, NULL, 0, h->b.size, 0,
                                     whole, add_extent, &sum);

  if (r < 0) {
    errno = -r;
    space_error (h, "backend %s: space held (diff iterate): %m",
                 h->b.identity.name);
    return -1;
  }
  v[0] = sum;
  return 0;
}

/* Run the monitor command cmd (JSON) and parse its JSON answer into
 * obj; *text (to free) holds the strings obj points to.  An answer that
 * is an array is parsed as the member "list" of an object.
 */
static int
mon_command (struct rbd_backend *h, const char *cmd, char **text,
             struct jf_object *obj)
{
  const char *cmds[] = { cmd };
  char *out = NULL, *outs = NULL;
  size_t outlen = 0, outslen = 0;
  int r = h->lib->rados_mon_command (h->cluster, cmds, 1, "", 0, &out,
                                     &outlen, &outs, &outslen);
  bool list = r >= 0 && outlen > 0 && out[0] == '[';

  *text = NULL;
  if (r < 0) {
    errno = -r;
    space_error (h, "backend %s: pool statistics: monitor command %s: "
                 "%.*s: %m", h->b.identity.name, cmd,
                 (int) MIN (outslen, (size_t) 256), outs ? outs : "");
  }
  else if ((*text = malloc (outlen + 10)) == NULL) {
    r = -1;
    space_error (h, "backend %s: pool statistics: %m", h->b.identity.name);
  }
  else {
    snprintf (*text, outlen + 10, "%s%.*s%s", list ? "{\"list\":" : "",
              (int) outlen, out, list ? "}" : "");
    if ((r = jf_parse (*text, obj)) == -1) {
      space_error (h, "backend %s: pool statistics: monitor command %s: "
                   "not the JSON answer expected: %.*s", h->b.identity.name,
                   cmd, (int) MIN (outlen, (size_t) 256), out);
      free (*text);
      errno = EPROTO;
    }
  }
  h->lib->rados_buffer_free (out);
  h->lib->rados_buffer_free (outs);
  return r < 0 ? -1 : 0;
}

/* Run the monitor command cmd, whose answer lists every pool under
 * list_key, each with its id under id_key, and open this image's pool's
 * entry into pool.  0 (free *text once done with pool), 1 when the list
 * has no such pool (nothing to free), -1 (reported) when the command
 * failed.
 */
static int
find_pool (struct rbd_backend *h, const char *cmd, const char *list_key,
           const char *id_key, char **text, struct jf_object *pool)
{
  int64_t want = h->lib->rados_ioctx_get_id (h->ioctx);
  const struct jf_member *pools;
  struct jf_object top;
  struct jf_member e;
  char *cursor = NULL;
  uint64_t id;

  if (mon_command (h, cmd, text, &top) == -1)
    return -1;
  pools = jf_find (&top, list_key);
  while (pools && jf_next (pools, &cursor, &e))
    if (jf_open (&e, pool) == 0 && jf_u64 (pool, id_key, &id) &&
        id == (uint64_t) want)
      return 0;
  free (*text);
  return 1;
}

/* The pool's MAX AVAIL as `ceph df` shows it: what it can still store
 * given its replication, its CRUSH rule's OSDs and their full ratio.
 */
static int
pool_max_avail (struct rbd_backend *h, uint64_t *avail)
{
  static const char cmd[] = "{\"prefix\":\"df\",\"format\":\"json\"}";
  struct jf_object pool, stats;
  const struct jf_member *figures;
  char *text;
  int r;

  if ((r = find_pool (h, cmd, "pools", "id", &text, &pool)) == -1)
    return -1;
  if (r == 0) {
    r = (figures = jf_find (&pool, "stats")) != NULL &&
        jf_open (figures, &stats) == 0 &&
        jf_u64 (&stats, "max_avail", avail) ? 0 : -1;
    free (text);
  }
  if (r != 0) {
    errno = ENOENT;
    space_error (h, "backend %s: pool statistics: the monitor's df has no "
                 "figures for pool %s yet (no ceph-mgr running?)",
                 h->b.identity.name, h->spec.pool);
    return -1;
  }
  return 0;
}

/* The pool's quota in bytes (0: none) and the bytes it counts against
 * it (num_bytes: every object's size, holes within it included, which
 * is more than `ceph df` STORED for a sparse image).
 */
static int
pool_quota (struct rbd_backend *h, uint64_t *quota, uint64_t *used)
{
  char cmd[1024], name[768], *text;
  struct jf_object obj;
  int r = -1;

  if (jf_quote (name, sizeof name, h->spec.pool) == -1) {
    errno = ENAMETOOLONG;
    space_error (h, "backend %s: pool statistics: pool name too long",
                 h->b.identity.name);
    return -1;
  }
  snprintf (cmd, sizeof cmd, "{\"prefix\":\"osd pool get-quota\","
            "\"pool\":%s,\"format\":\"json\"}", name);
  if (mon_command (h, cmd, &text, &obj) == -1)
    return -1;
  if (jf_u64 (&obj, "quota_max_bytes", quota) &&
      jf_u64 (&obj, "current_num_bytes", used))
    r = 0;
  else {
    errno = EPROTO;
    space_error (h, "backend %s: pool statistics: osd pool get-quota %s: "
                 "no quota_max_bytes and current_num_bytes",
                 h->b.identity.name, h->spec.pool);
  }
  free (text);
  return r;
}

/* The RBD_POOL_* bits of a pool's flags_names ("hashpspool,full,..."). */
static unsigned
flag_bits (const char *names)
{
  static const struct { const char *name; unsigned bit; } known[] = {
    { "nearfull", RBD_POOL_NEARFULL }, { "full", RBD_POOL_FULL },
    { "full_quota", RBD_POOL_FULL_QUOTA },
  };
  unsigned bits = 0;
  const char *p = names ? names : "";

  while (*p) {
    size_t n = strcspn (p, ",");

    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
      if (strlen (known[i].name) == n && strncmp (p, known[i].name, n) == 0)
        bits |= known[i].bit;
    p += n + (p[n] == ',');
  }
  return bits;
}

/* The pool's flags in the OSD map (`osd pool ls detail`: every pool,
 * but not the OSDs, which `osd dump` would add to each reading).  Since
 * Mimic a full OSD marks the pools it holds full, so the pool's own
 * flags say it all.
 */
static int
pool_flags (struct rbd_backend *h, unsigned *flags)
{
  static const char cmd[] =
    "{\"prefix\":\"osd pool ls\",\"detail\":\"detail\",\"format\":\"json\"}";
  struct jf_object pool;
  char *text;
  int r;

  if ((r = find_pool (h, cmd, "list", "pool_id", &text, &pool)) == -1)
    return -1;
  if (r == 1) {
    errno = ENOENT;
    space_error (h, "backend %s: pool statistics: pool %s is not in the "
                 "OSD map", h->b.identity.name, h->spec.pool);
    return -1;
  }
  *flags = flag_bits (jf_str (&pool, "flags_names"));
  free (text);
  return 0;
}

/* What the pool can still take: its MAX AVAIL, or less if its quota
 * leaves less (*avail); and what it holds (*used).
 */
static int
pool_space (struct rbd_backend *h, uint64_t *avail, uint64_t *used)
{
  uint64_t quota;

  if (pool_max_avail (h, avail) == -1 || pool_quota (h, &quota, used) == -1)
    return -1;
  if (quota)
    *avail = MIN (*avail, quota > *used ? quota - *used : 0);
  return 0;
}

/* v[0]: what writes can still take, 0 while the pool is flagged full;
 * v[1]: that plus what the pool holds.  A pool flagged full needs no
 * statistics to say so (a cluster without ceph-mgr has none): then
 * both are 0.
 */
static int
compute_free (struct rbd_backend *h, uint64_t v[2], unsigned *flags)
{
  uint64_t avail, used;

  if (pool_flags (h, flags) == -1)
    return -1;
  if (pool_space (h, &avail, &used) == -1) {
    if (*flags == 0)
      return -1;
    v[0] = v[1] = 0;
    return 0;
  }
  v[1] = used + avail;
  v[0] = *flags ? 0 : avail;
  return 0;
}

int
rbd_space_check (struct rbd_backend *h)
{
  uint64_t avail, used;

  if (pool_space (h, &avail, &used) == -1) {
    dc_error ("low-water: backend=%s: the pool's free space cannot be read "
              "(above), so low-water= could never act: start ceph-mgr, or "
              "leave low-water= unset", h->b.identity.name);
    return -1;
  }
  return 0;
}

/* Store what one reading got (r: 0 or -1 with errno), logging a change
 * between working and failing once.
 */
static void
store_locked (struct rbd_backend *h, struct rbd_reading *rd, const char *what,
              int r, const uint64_t v[2], uint64_t now)
{
  rd->tried_ms = now;
  if (r == 0) {
    if (rd->err)
      dc_error ("backend %s: %s: read again", h->b.identity.name, what);
    rd->v[0] = v[0];
    rd->v[1] = v[1];
    rd->at_ms = now;
    rd->err = 0;
  }
  else
    rd->err = errno ? errno : EIO;
}

/* Whether rd is wanted and due at now; else lower *next_ms to when it
 * is (a failed reading too waits for its interval).
 */
static bool
due (const struct rbd_reading *rd, uint64_t interval_ms, uint64_t now,
     uint64_t *next_ms)
{
  if (rd->wanted_ms == 0 || now - rd->wanted_ms > RBD_WANTED_MS)
    return false;
  if (rd->tried_ms == 0 || now >= rd->tried_ms + interval_ms)
    return true;
  *next_ms = MIN (*next_ms, rd->tried_ms + interval_ms);
  return false;
}

/* One pass: what is due is read, the lock dropped around each reading. */
static uint64_t
refresh_locked (struct rbd_backend *h)
{
  struct rbd_space *sp = &h->space;
  uint64_t now = monotonic_ms (), next = now + RBD_FREE_INTERVAL_MS;
  uint64_t v[2] = { 0, 0 };
  unsigned flags = 0;
  int r;

  if (due (&sp->free, RBD_FREE_INTERVAL_MS, now, &next)) {
    sp->quiet = sp->free.err != 0;
    pthread_mutex_unlock (&sp->lock);
    r = compute_free (h, v, &flags);
    pthread_mutex_lock (&sp->lock);
    store_locked (h, &sp->free, "pool statistics", r, v,
                  MAX (now, UINT64_C (1)));
    if (r == 0) {
      if (flags && !sp->pool_flags)
        dc_error ("backend %s: pool %s is flagged %s%s%s in the OSD map: "
                  "reporting no free space", h->b.identity.name,
                  h->spec.pool, flags & RBD_POOL_NEARFULL ? "nearfull " : "",
                  flags & RBD_POOL_FULL ? "full " : "",
                  flags & RBD_POOL_FULL_QUOTA ? "full_quota" : "");
      sp->pool_flags = flags;
    }
  }
  if (due (&sp->allocated, RBD_ALLOCATED_INTERVAL_MS, now, &next)) {
    sp->quiet = sp->allocated.err != 0;
    pthread_mutex_unlock (&sp->lock);
    r = compute_allocated (h, v);
    pthread_mutex_lock (&sp->lock);
    store_locked (h, &sp->allocated, "space held", r, v,
                  MAX (now, UINT64_C (1)));
  }
  return next;
}

static void *
space_thread (void *arg)
{
  struct rbd_backend *h = arg;
  struct rbd_space *sp = &h->space;

  pthread_mutex_lock (&sp->lock);
  while (!sp->stop) {
    uint64_t next = refresh_locked (h), now = monotonic_ms ();
    struct timespec ts;

    if (sp->stop || next <= now)
      continue;
    ts = deadline_after_ms (next - now);
    pthread_cond_timedwait (&sp->wake, &sp->lock, &ts);
  }
  pthread_mutex_unlock (&sp->lock);
  return NULL;
}

void
rbd_space_init (struct rbd_backend *h)
{
  pthread_mutex_init (&h->space.lock, NULL);
  monotonic_cond_init (&h->space.wake);
}

int
rbd_space_start (struct backend *b)
{
  struct rbd_backend *h = (struct rbd_backend *) b;
  int r;

  if (h->space.running || h->image == NULL)
    return 0;
  h->space.stop = false;
  /* One reading of the space held at start, so that the statistics
   * have a figure before anyone asked (a statsfile of a short run).
   */
  h->space.allocated.wanted_ms = MAX (monotonic_ms (), UINT64_C (1));
  r = pthread_create (&h->space.thread, NULL, space_thread, h);
  if (r != 0) {
    errno = r;
    dc_error ("backend %s: cannot start the space thread: %m",
              b->identity.name);
    return -1;
  }
  h->space.running = true;
  return 0;
}

void
rbd_space_stop (struct rbd_backend *h)
{
  struct rbd_space *sp = &h->space;

  if (sp->running) {
    pthread_mutex_lock (&sp->lock);
    sp->stop = true;
    pthread_cond_signal (&sp->wake);
    pthread_mutex_unlock (&sp->lock);
    pthread_join (sp->thread, NULL);
    sp->running = false;
  }
}

/* The last reading rd into v, marking it wanted (and waking the thread
 * if it was not).  0, or -1 with errno: EAGAIN before the first reading,
 * or the reading's error if it never worked.
 */
static int
last_reading (struct rbd_backend *h, struct rbd_reading *rd, uint64_t v[2])
{
  struct rbd_space *sp = &h->space;
  uint64_t now = monotonic_ms ();
  int r = 0;

  pthread_mutex_lock (&sp->lock);
  if (rd->wanted_ms == 0 || now - rd->wanted_ms > RBD_WANTED_MS / 2) {
    if (rd->wanted_ms == 0 || now - rd->wanted_ms > RBD_WANTED_MS)
      pthread_cond_signal (&sp->wake);
    rd->wanted_ms = MAX (now, UINT64_C (1));
  }
  if (rd->at_ms == 0) {
    errno = rd->err ? rd->err : EAGAIN;
    r = -1;
  }
  else {
    v[0] = rd->v[0];
    v[1] = rd->v[1];
  }
  pthread_mutex_unlock (&sp->lock);
  return r;
}

int
rbd_allocated (struct backend *b, uint64_t *bytes)
{
  struct rbd_backend *h = (struct rbd_backend *) b;
  uint64_t v[2];

  if (last_reading (h, &h->space.allocated, v) == -1)
    return -1;
  *bytes = v[0];
  return 0;
}

int
rbd_free_space (struct backend *b, uint64_t *free_bytes, uint64_t *total)
{
  struct rbd_backend *h = (struct rbd_backend *) b;
  uint64_t v[2];

  if (last_reading (h, &h->space.free, v) == -1)
    return -1;
  *free_bytes = v[0];
  *total = v[1];
  return 0;
}

/* The age of rd at now, -1 if never read. */
static int64_t
age_ms (const struct rbd_reading *rd, uint64_t now)
{
  return rd->at_ms ? (int64_t) (now - rd->at_ms) : -1;
}

int
rbd_readings (struct backend *b, struct backend_readings *r)
{
  struct rbd_backend *h = (struct rbd_backend *) b;
  struct rbd_space *sp = &h->space;
  uint64_t now = monotonic_ms ();

  pthread_mutex_lock (&sp->lock);
  r->allocated_age_ms = age_ms (&sp->allocated, now);
  r->allocated_error = sp->allocated.err;
  r->free_age_ms = age_ms (&sp->free, now);
  r->free_error = sp->free.err;
  pthread_mutex_unlock (&sp->lock);
  return 0;
}
