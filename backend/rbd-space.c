/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the RBD backend's space (rbd-internal.h): what the image
 * holds (backend_allocated) and what its pool can still store (the
 * free_space op, for low-water=).  Both cost a walk of the image or a
 * round trip to the monitor, so each is kept for an interval and
 * recomputed by one caller at a time.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arith.h"
#include "clock.h"
#include "json-flat.h"
#include "log.h"
#include "rbd-internal.h"

/* The figures of c, computed by fn at most every interval_ms: the caller
 * that finds them older computes them (fn reports its failure, once per
 * interval), the others answer the last ones.  A pair may mix two
 * computations only for a caller racing the one computing.  0, or -1
 * with errno set when no computation has succeeded yet (silently but
 * for the caller that computed).
 */
static int
cached (struct rbd_backend *h, struct rbd_cache *c, uint64_t interval_ms,
        int (*fn) (struct rbd_backend *h, uint64_t v[2]), uint64_t v[2])
{
  uint64_t at = atomic_load (&c->at_ms), now = monotonic_ms (), got[2];

  if ((!at || now - at >= interval_ms) &&
      !atomic_flag_test_and_set (&c->busy)) {
    if (fn (h, got) == 0) {
      atomic_store (&c->v[0], got[0]);
      atomic_store (&c->v[1], got[1]);
      atomic_store (&c->err, 0);
    }
    else if (atomic_load (&c->err) != 0)
      atomic_store (&c->err, errno);
    /* A failure too waits for the interval. */
    atomic_store (&c->at_ms, MAX (now, UINT64_C (1)));
    atomic_flag_clear (&c->busy);
  }
  if (atomic_load (&c->err) != 0) {
    errno = atomic_load (&c->err);
    return -1;
  }
  v[0] = atomic_load (&c->v[0]);
  v[1] = atomic_load (&c->v[1]);
  return 0;
}

void
rbd_cache_init (struct rbd_cache *c)
{
  atomic_flag_clear (&c->busy);
  atomic_init (&c->at_ms, 0);
  atomic_init (&c->v[0], 0);
  atomic_init (&c->v[1], 0);
  atomic_init (&c->err, EAGAIN);        /* nothing computed yet */
}

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

  if (r < 0)
    return rbd_fail (h, "space held (diff iterate)", r);
  v[0] = sum;
  return 0;
}

int
rbd_allocated (struct backend *b, uint64_t *bytes)
{
  struct rbd_backend *h = (struct rbd_backend *) b;
  uint64_t v[2];

  if (h->image == NULL) {       /* between the fork hooks */
    errno = ENOTSUP;
    return -1;
  }
  if (cached (h, &h->allocated, RBD_ALLOCATED_INTERVAL_MS,
              compute_allocated, v) == -1)
    return -1;
  *bytes = v[0];
  return 0;
}

/* Run the monitor command cmd (JSON) and parse its JSON answer into
 * obj; *text (to free) holds the strings obj points to.
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

  *text = NULL;
  if (r < 0) {
    errno = -r;
    dc_error ("backend %s: free space: monitor command %s: %.*s: %m",
              h->b.identity.name, cmd, (int) MIN (outslen, (size_t) 256),
              outs ? outs : "");
  }
  else if ((*text = malloc (outlen + 1)) == NULL) {
    r = -1;
    dc_error ("backend %s: free space: %m", h->b.identity.name);
  }
  else {
    memcpy (*text, out, outlen);
    (*text)[outlen] = '\0';
    if ((r = jf_parse (*text, obj)) == -1) {
      dc_error ("backend %s: free space: monitor command %s: not the JSON "
                "answer expected: %.*s", h->b.identity.name, cmd,
                (int) MIN (outlen, (size_t) 256), out);
      free (*text);
      errno = EPROTO;
    }
  }
  h->lib->rados_buffer_free (out);
  h->lib->rados_buffer_free (outs);
  return r < 0 ? -1 : 0;
}

/* The pool's MAX AVAIL as `ceph df` shows it: what it can still store
 * given its replication, its CRUSH rule's OSDs and their full ratio.
 */
static int
pool_max_avail (struct rbd_backend *h, uint64_t *avail)
{
  static const char cmd[] = "{\"prefix\":\"df\",\"format\":\"json\"}";
  struct jf_object top, pool, stats;
  const struct jf_member *pools, *figures;
  struct jf_member e;
  char *text, *cursor = NULL;
  int64_t want = h->lib->rados_ioctx_get_id (h->ioctx);
  uint64_t id;
  int r = -1;

  if (mon_command (h, cmd, &text, &top) == -1)
    return -1;
  pools = jf_find (&top, "pools");
  while (r == -1 && pools && jf_next (pools, &cursor, &e)) {
    if (jf_open (&e, &pool) == 0 && jf_u64 (&pool, "id", &id) &&
        id == (uint64_t) want &&
        (figures = jf_find (&pool, "stats")) != NULL &&
        jf_open (figures, &stats) == 0 &&
        jf_u64 (&stats, "max_avail", avail))
      r = 0;
  }
  free (text);
  if (r == -1) {
    errno = ENOENT;
    dc_error ("backend %s: free space: the monitor's df has no figures "
              "for pool %s yet (no ceph-mgr running?)", h->b.identity.name,
              h->spec.pool);
  }
  return r;
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
    dc_error ("backend %s: free space: pool name too long",
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
    dc_error ("backend %s: free space: osd pool get-quota %s: no "
              "quota_max_bytes and current_num_bytes", h->b.identity.name,
              h->spec.pool);
  }
  free (text);
  return r;
}

/* v[0]: what writes can still take, the pool's MAX AVAIL, or less if
 * its quota leaves less; v[1]: that plus what the pool holds.
 */
static int
compute_free (struct rbd_backend *h, uint64_t v[2])
{
  uint64_t avail, quota, used;

  if (pool_max_avail (h, &avail) == -1 ||
      pool_quota (h, &quota, &used) == -1)
    return -1;
  if (quota)
    avail = MIN (avail, quota > used ? quota - used : 0);
  v[0] = avail;
  v[1] = used + avail;
  return 0;
}

int
rbd_free_space (struct backend *b, uint64_t *free, uint64_t *total)
{
  struct rbd_backend *h = (struct rbd_backend *) b;
  uint64_t v[2];

  if (h->cluster == NULL)       /* between the fork hooks */
    return rbd_fail (h, "free space", -ENOTCONN);
  if (cached (h, &h->free, RBD_FREE_INTERVAL_MS, compute_free, v) == -1)
    return -1;
  *free = v[0];
  *total = v[1];
  return 0;
}
