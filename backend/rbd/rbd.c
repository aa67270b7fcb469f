/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the RBD backend, a Ceph RBD image reached through
 * librbd's C API (backend=rbd:POOL/[NAMESPACE/]IMAGE[@SNAP]).  Functions
 * are named rbdb_* (rbd_* is librbd's namespace); librbd's and
 * librados's are called through h->lib (rbd-lib.h), loaded at open.
 *
 * Concurrency: every operation is one asynchronous librbd request
 * (rbd_aio_*) that the calling thread waits for.  librbd runs them side
 * by side, each cut into requests to the objects it spans, so as many
 * requests are in flight as the front-end has threads: more than the
 * NBD backend's pool of connections, with no pool to queue on.
 *
 * Geometry: the image is made of objects (4 MiB by default), and a
 * discard frees space only where it covers whole objects (rados delete);
 * a part of one becomes a truncate or a zeroing, or nothing below
 * rbd_discard_granularity_bytes.  So the granularity=auto default is an
 * object (discard_preferred), while granularity= may go down to 4 KiB.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "internal.h"
#include "log.h"
#include "rbd-internal.h"
#include "strdup-null.h"

/* The smallest discard worth sending: librbd takes any byte range, but
 * below a file system block it can free nothing.
 */
#define RBDB_MIN_GRANULARITY 4096

enum rbdb_op { OP_READ, OP_WRITE, OP_ZERO, OP_DISCARD, OP_FLUSH };
static const char *const op_names[] = {
  [OP_READ] = "read", [OP_WRITE] = "write", [OP_ZERO] = "write zeroes",
  [OP_DISCARD] = "discard", [OP_FLUSH] = "flush",
};

/* Report the failure r of op, naming what it means here, and return -1
 * with errno set (backend_errno maps it for the client: EIO, or ENOSPC
 * for a full pool or quota).
 */
static int
op_failed (struct rbd_backend *h, enum rbdb_op op, ssize_t r)
{
  const char *name = h->b.identity.name;

  if (r == -ETIMEDOUT) {
    errno = ETIMEDOUT;
    dc_error ("backend %s: %s: no answer from the cluster within "
              "rbd-timeout=%" PRIu64 "ms", name, op_names[op],
              rbd_timeout_ms (h));
    return -1;
  }
  if (r == -ESHUTDOWN ||
      (r == -EROFS && !h->b.limits.read_only)) {
    errno = -r;
    dc_error ("backend %s: %s: %m: this client lost the image's lock (the "
              "cluster fenced it: blocklisted, another server took the "
              "image over)", name, op_names[op]);
    return -1;
  }
  if (r == -EDQUOT || r == -ENOSPC) {
    errno = -r;
    dc_error ("backend %s: %s: %m: pool %s is full (or over its quota)",
              name, op_names[op], h->spec.pool);
    return -1;
  }
  return rbd_fail (h, op_names[op], (int) r);
}

/* Send one request and wait for its completion, at most rbd-timeout=
 * (rbd-wait.c).  librbd's errors are negative errnos; a read returns
 * the bytes read, which past the end of the data are zeros: never short
 * within the image.
 */
static int
submit (struct rbd_backend *h, enum rbdb_op op, void *buf, uint64_t count,
        uint64_t offset, int zero_flags)
{
  const struct rbd_lib *lib = h->lib;
  struct rbd_wait *w;
  rbd_completion_t c;
  ssize_t r = 0;

  /* Closed by backend_before_fork and not reopened: no write since the
   * close (which flushed), so a flush has nothing to do.
   */
  if (h->image == NULL) {
    if (op == OP_FLUSH)
      return 0;
    return rbd_fail (h, op_names[op], -ENOTCONN);
  }
  w = rbd_wait_new (h, op == OP_READ ? count : 0, &c);
  if (w == NULL)
    return -1;
  switch (op) {
  case OP_READ:
    r = lib->rbd_aio_read (h->image, offset, count, rbd_wait_buffer (w), c);
    break;
  case OP_WRITE:
    r = lib->rbd_aio_write (h->image, offset, count, buf, c);
    break;
  case OP_ZERO:
    r = lib->rbd_aio_write_zeroes (h->image, offset, count, c, zero_flags, 0);
    break;
  case OP_DISCARD:
    r = lib->rbd_aio_discard (h->image, offset, count, c);
    break;
  case OP_FLUSH:
    r = lib->rbd_aio_flush (h->image, c);
    break;
  }
  if (r < 0) {
    rbd_wait_not_sent (w, c);
    return op_failed (h, op, r);
  }
  r = rbd_wait_for (w, rbd_timeout_ms (h), buf, op == OP_READ ? count : 0);
  return r < 0 ? op_failed (h, op, r) : 0;
}

static int
rbdb_flush (struct backend *b)
{
  return submit ((struct rbd_backend *) b, OP_FLUSH, NULL, 0, 0, 0);
}

/* librbd has no per-request FUA: a flush after the request. */
static int
flush_if (struct backend *b, bool fua)
{
  return fua ? rbdb_flush (b) : 0;
}

static int
rbdb_pread (struct backend *b, void *buf, uint32_t count, uint64_t offset)
{
  if (backend_check_range (b, "pread", offset, count, false, EINVAL) == -1)
    return -1;
  return submit ((struct rbd_backend *) b, OP_READ, buf, count, offset, 0);
}

static int
rbdb_pwrite (struct backend *b, const void *buf, uint32_t count,
             uint64_t offset, bool fua)
{
  if (backend_check_range (b, "pwrite", offset, count, true, ENOSPC) == -1 ||
      submit ((struct rbd_backend *) b, OP_WRITE, (void *) buf, count,
              offset, 0) == -1)
    return -1;
  return flush_if (b, fua);
}

/* Without may_trim the zeroes are written out (thick), so the range
 * stays allocated as the caller asked.
 */
static int
rbdb_zero (struct backend *b, uint64_t offset, uint64_t length,
           bool may_trim, bool fua)
{
  int flags = may_trim ? 0 : RBD_WRITE_ZEROES_FLAG_THICK_PROVISION;

  if (backend_check_range (b, "zero", offset, length, true, ENOSPC) == -1 ||
      submit ((struct rbd_backend *) b, OP_ZERO, NULL, length, offset,
              flags) == -1)
    return -1;
  return flush_if (b, fua);
}

static int
rbdb_discard (struct backend *b, uint64_t offset, uint64_t length, bool fua)
{
  if (backend_check_range (b, "discard", offset, length, true, EINVAL) == -1)
    return -1;
  if (!backend_discard_align_verified (b, &offset, &length))
    return 0;
  if (submit ((struct rbd_backend *) b, OP_DISCARD, NULL, length, offset,
              0) == -1)
    return -1;
  return flush_if (b, fua);
}

static void
rbdb_close (struct backend *b)
{
  struct rbd_backend *h = (struct rbd_backend *) b;

  rbd_space_stop (h);
  rbd_disconnect (h);
  pthread_cond_destroy (&h->space.wake);
  pthread_mutex_destroy (&h->space.lock);
  rbd_spec_free (&h->spec);
  free ((char *) h->opts.conf);
  free ((char *) h->opts.id);
  free ((char *) h->opts.keyring);
  free ((char *) h->opts.holder_file);
  free (h);
}

static const struct backend_ops rbdb_ops = {
  .kind = "rbd",
  .pread = rbdb_pread,
  .pwrite = rbdb_pwrite,
  .zero = rbdb_zero,
  .discard = rbdb_discard,
  .flush = rbdb_flush,
  .lock = rbd_lock,
  .allocated = rbd_allocated,
  .free_space = rbd_free_space,
  .start = rbd_space_start,
  .readings = rbd_readings,
  .before_fork = rbd_before_fork,
  .after_fork = rbd_after_fork,
  .close = rbdb_close,
};

/* The unit a discard frees whole: an object, or with striping (stripe
 * count N > 1) a set of N objects, which covers N * object size
 * consecutive bytes.
 */
static uint64_t
free_unit (struct rbd_backend *h)
{
  uint64_t count = 1, unit;

  if (h->lib->rbd_get_stripe_count (h->image, &count) < 0 || count == 0)
    count = 1;
  unit = h->object_size * count;
  return is_power_of_2 (unit) ? unit : h->object_size;
}

static int
probe (struct rbd_backend *h, bool read_only)
{
  struct backend_limits *l = &h->b.limits;
  rbd_image_info_t info;
  uint64_t unit;
  int r = h->lib->rbd_stat (h->image, &info, sizeof info);

  if (r < 0 || (r = h->lib->rbd_get_features (h->image, &h->features)) < 0)
    return rbd_fail (h, "stat", r);
  h->b.size = info.size;
  h->object_size = info.obj_size;
  unit = MIN (free_unit (h), BACKEND_MAX_DISCARD);
  l->read_only = read_only;
  l->can_discard = l->can_zero = !read_only;
  l->can_fua = false;
  l->can_flush = true;
  l->can_extents = false;
  l->discard_zeroes = false;    /* a part of an object may be left as is */
  l->free_says_full = true;     /* rbd-space.c: the pool's flags */
  l->zero_unmaps = false;
  l->can_multi_conn = true;     /* one image handle: a flush covers all */
  l->discard_granularity = RBDB_MIN_GRANULARITY;
  l->discard_preferred = unit > RBDB_MIN_GRANULARITY ? unit : 0;
  l->max_discard = round_down (BACKEND_MAX_DISCARD,
                               MAX (unit, (uint64_t) RBDB_MIN_GRANULARITY));
  l->min_block = 0;
  l->pref_block = RBDB_MIN_GRANULARITY;
  l->max_block = 0;
  return 0;
}

struct backend *
backend_rbd_open (const char *spec, const struct backend_options *o)
{
  static const struct backend_rbd_options defaults;
  const struct backend_rbd_options *rbd = o->rbd ? o->rbd : &defaults;
  struct rbd_backend *h = calloc (1, sizeof *h);

  if (h == NULL) {
    dc_error ("backend=%s: %m", spec);
    return NULL;
  }
  h->b.ops = &rbdb_ops;
  rbd_space_init (h);
  backend_set_identity (&h->b, "rbd", 0, 0, spec);
  if (rbd_spec_parse (spec, &h->spec) == -1) {
    free (h);
    return NULL;
  }
  /* Before anything touches Ceph: only this backend loads its libraries. */
  h->lib = rbd_lib_get (spec);
  if (h->lib == NULL) {
    int err = errno;

    rbd_spec_free (&h->spec);
    free (h);
    errno = err;
    return NULL;
  }
  h->read_only = o->read_only;
  h->opts.timeout_ms = rbd->timeout_ms;
  if (strdup_null (rbd->conf, (char **) &h->opts.conf) == -1 ||
      strdup_null (rbd->holder_file, (char **) &h->opts.holder_file) == -1 ||
      strdup_null (rbd->id, (char **) &h->opts.id) == -1 ||
      strdup_null (rbd->keyring, (char **) &h->opts.keyring) == -1) {
    dc_error ("backend=%s: out of memory", spec);
    rbdb_close (&h->b);
    errno = ENOMEM;
    return NULL;
  }
  if (rbd_connect (h) == -1 ||
      probe (h, o->read_only || h->spec.snap != NULL) == -1 ||
      (o->need_free_space && rbd_space_check (h) == -1)) {
    int err = errno;

    rbdb_close (&h->b);
    errno = err;
    return NULL;
  }
  dc_debug ("backend %s: rbd, size %" PRIu64 ", object size %" PRIu64
            ", features 0x%" PRIx64, spec, h->b.size, h->object_size,
            h->features);
  return &h->b;
}
