/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the RBD backend's way to its image (rbd-internal.h):
 * connecting to the cluster within a bound, opening the image and taking
 * its exclusive lock without stealing it.
 *
 * Every step that talks to the cluster is bounded by rbd-timeout=
 * (librados's client_mount_timeout for the connect, rados_mon_op_timeout
 * and rados_osd_op_timeout for what follows), so a start against a
 * cluster that is down fails with a message instead of hanging.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arith.h"
#include "log.h"
#include "rbd-internal.h"

int
rbd_fail (struct rbd_backend *h, const char *op, int r)
{
  errno = -r;
  dc_error ("backend %s: %s: %m", h->b.identity.name, op);
  return -1;
}

/* Report the failure r of a start step and return -1 with errno. */
static int start_fail (struct rbd_backend *h, int r, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static int
start_fail (struct rbd_backend *h, int r, const char *fmt, ...)
{
  char what[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (what, sizeof what, fmt, ap);
  va_end (ap);
  errno = -r;
  dc_error ("backend=%s: %s: %m", h->b.identity.name, what);
  return -1;
}

uint64_t
rbd_timeout_ms (const struct rbd_backend *h)
{
  return h->opts.timeout_ms ? h->opts.timeout_ms
                                : RBD_DEFAULT_TIMEOUT_MS;
}

/* rbd-timeout= as whole seconds, at least 1 (librados counts seconds). */
static unsigned
timeout_s (const struct backend_rbd_options *o)
{
  uint64_t ms = o->timeout_ms ? o->timeout_ms : RBD_DEFAULT_TIMEOUT_MS;

  return (unsigned) MAX (UINT64_C (1), (ms + 999) / 1000);
}

/* librados's bounds, each rbd-timeout= (a request as a whole is bounded
 * by rbd-wait.c), and zero-copy writes off: a request given up at its
 * deadline must not read the caller's buffer afterwards.
 */
static int
set_timeouts (struct rbd_backend *h, const struct backend_rbd_options *o)
{
  static const char *const keys[] = {
    "client_mount_timeout", "rados_mon_op_timeout", "rados_osd_op_timeout",
  };
  char v[32];
  int r;

  snprintf (v, sizeof v, "%u", timeout_s (o));
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    r = h->lib->rados_conf_set (h->cluster, keys[i], v);
    if (r < 0)
      return start_fail (h, r, "rbd-timeout: cannot set %s to %s s", keys[i],
                         v);
  }
  r = h->lib->rados_conf_set (h->cluster, "rbd_disable_zero_copy_writes",
                              "true");
  if (r < 0)
    return start_fail (h, r, "cannot set rbd_disable_zero_copy_writes");
  /* librbd's cache (rbd_cache, writearound by default) acknowledges a
   * write before the OSD has it and reports a failure at a later flush,
   * or not at all: at a full pool, a write and flush that succeeded
   * after failed ones read back as zeros (tests/ceph, case quota: 3 runs
   * in 9 with the cache, none in 8 without).  Each write's answer must
   * be its own.  The cost: QD1 writes wait for the OSD (about 1.6x fewer
   * here, docs/design-notes.md).
   */
  r = h->lib->rados_conf_set (h->cluster, "rbd_cache", "false");
  if (r < 0)
    return start_fail (h, r, "cannot set rbd_cache");
  return 0;
}

/* The configuration: rbd-conf=, else what rbd(8) reads ($CEPH_CONF,
 * /etc/ceph/ceph.conf, ~/.ceph/ceph.conf, ./ceph.conf), then CEPH_ARGS.
 */
static int
read_conf (struct rbd_backend *h, const struct backend_rbd_options *o)
{
  int r;

  if (o->conf && access (o->conf, R_OK) == -1) {
    dc_error ("rbd-conf=%s: %m: expected the Ceph configuration file of "
              "the cluster (ceph.conf)", o->conf);
    return -1;
  }
  r = h->lib->rados_conf_read_file (h->cluster, o->conf);
  if (r < 0 && o->conf) {
    errno = -r;
    dc_error ("rbd-conf=%s: not a Ceph configuration file: %m", o->conf);
    return -1;
  }
  if (r < 0) {
    errno = -r;
    dc_error ("backend=%s: no Ceph configuration found ($CEPH_CONF, "
              "/etc/ceph/ceph.conf, ~/.ceph/ceph.conf, ./ceph.conf): %m: "
              "set rbd-conf=FILE", h->b.identity.name);
    return -1;
  }
  r = h->lib->rados_conf_parse_env (h->cluster, NULL);
  if (r < 0)
    return start_fail (h, r, "CEPH_ARGS: cannot parse");
  if (o->keyring) {
    if (access (o->keyring, R_OK) == -1) {
      dc_error ("rbd-keyring=%s: %m: expected a Ceph keyring file",
                o->keyring);
      return -1;
    }
    r = h->lib->rados_conf_set (h->cluster, "keyring", o->keyring);
    if (r < 0) {
      errno = -r;
      dc_error ("rbd-keyring=%s: %m", o->keyring);
      return -1;
    }
  }
  return set_timeouts (h, o);
}

/* Explain a failed rados_connect, naming the keys that may be wrong. */
static int
connect_failed (struct rbd_backend *h, const struct backend_rbd_options *o,
                const char *id, int r)
{
  char mons[256] = "?";
  const char *conf = o->conf ? o->conf : "the default configuration";

  h->lib->rados_conf_get (h->cluster, "mon_host", mons, sizeof mons);
  errno = -r;
  if (r == -ETIMEDOUT || r == -EHOSTUNREACH || r == -ECONNREFUSED)
    dc_error ("backend=%s: no cluster reachable at mon_host %s (from "
              "rbd-conf: %s) within rbd-timeout=%us: %m", h->b.identity.name,
              mons, conf, timeout_s (o));
  else if (r == -EACCES || r == -EPERM || r == -ENOENT || r == -EINVAL ||
           r == -EKEYREJECTED)
    dc_error ("backend=%s: the cluster at mon_host %s refused client.%s: %m: "
              "check rbd-id= and rbd-keyring= (and the keyring rbd-conf: %s "
              "names)", h->b.identity.name, mons, id, conf);
  else
    dc_error ("backend=%s: cannot connect to the cluster at mon_host %s "
              "(rbd-conf: %s): %m", h->b.identity.name, mons, conf);
  return -1;
}

/* The client id without a "client." in front (rbd --id's form). */
static const char *
client_id (const struct backend_rbd_options *o)
{
  const char *id = o->id ? o->id : "admin";

  return strncmp (id, "client.", 7) == 0 ? id + 7 : id;
}

static int
open_pool (struct rbd_backend *h)
{
  const struct rbd_spec *sp = &h->spec;
  bool exists = false;
  int r = h->lib->rados_ioctx_create (h->cluster, sp->pool, &h->ioctx);

  if (r == -ENOENT)
    return start_fail (h, r, "no pool %s in the cluster", sp->pool);
  if (r < 0)
    return start_fail (h, r, "cannot open pool %s", sp->pool);
  /* A write to a full pool (or one over its quota) would wait in the
   * client until space comes back, and fail only at rbd-timeout= with
   * ETIMEDOUT; with "full try" the OSD answers ENOSPC or EDQUOT at once
   * (librbd's image opened on this pool inherits it), and deletions,
   * which free space, still run.
   */
  h->lib->rados_set_pool_full_try (h->ioctx);
  if (sp->nspace[0] == '\0')
    return 0;
  r = h->lib->rbd_namespace_exists (h->ioctx, sp->nspace, &exists);
  if (r < 0)
    return start_fail (h, r, "cannot look up namespace %s in pool %s",
                       sp->nspace, sp->pool);
  if (!exists)
    return start_fail (h, -ENOENT, "no namespace %s in pool %s",
                       sp->nspace, sp->pool);
  h->lib->rados_ioctx_set_namespace (h->ioctx, sp->nspace);
  return 0;
}

static int
open_image (struct rbd_backend *h, bool read_only)
{
  const struct rbd_spec *sp = &h->spec;
  int r = read_only
    ? h->lib->rbd_open_read_only (h->ioctx, sp->image, &h->image, sp->snap)
    : h->lib->rbd_open (h->ioctx, sp->image, &h->image, NULL);

  if (r == -ENOENT && sp->snap)
    return start_fail (h, r, "no image %s, or no snapshot %s of it",
                       sp->image, sp->snap);
  if (r == -ENOENT)
    return start_fail (h, r, "no image %s in pool %s", sp->image, sp->pool);
  if (r < 0) {
    h->image = NULL;
    return start_fail (h, r, "cannot open image %s", sp->image);
  }
  return 0;
}

int
rbd_connect (struct rbd_backend *h)
{
  const struct backend_rbd_options *o = &h->opts;
  const char *id = client_id (o);
  int r;

  /* Refused before any time is spent on the cluster. */
  if (h->spec.snap && !h->read_only) {
    errno = EROFS;
    dc_error ("backend=%s: snapshot %s cannot be written: serve it "
              "read-only (readonly=on)", h->b.identity.name, h->spec.snap);
    return -1;
  }
  r = h->lib->rados_create (&h->cluster, id);
  if (r < 0) {
    h->cluster = NULL;
    errno = -r;
    dc_error ("rbd-id=%s: %m", id);
    return -1;
  }
  if (read_conf (h, o) == -1)
    return -1;
  r = h->lib->rados_connect (h->cluster);
  if (r < 0)
    return connect_failed (h, o, id, r);
  return open_pool (h) == -1 ? -1 : open_image (h, h->read_only);
}

int
rbd_before_fork (struct backend *b)
{
  struct rbd_backend *h = (struct rbd_backend *) b;

  h->relock = h->locked;
  h->locked = false;
  rbd_disconnect (h);
  dc_debug ("backend %s: disconnected until the fork is done",
            b->identity.name);
  return 0;
}

int
rbd_after_fork (struct backend *b)
{
  struct rbd_backend *h = (struct rbd_backend *) b;
  uint64_t size;
  int r;

  if (h->image)
    return 0;
  if (rbd_connect (h) == -1)
    return -1;
  r = h->lib->rbd_get_size (h->image, &size);
  if (r < 0)
    return rbd_fail (h, "size", r);
  if (size != b->size) {
    dc_error ("backend=%s: the image was resized from %" PRIu64 " to %"
              PRIu64 " bytes while the server started", b->identity.name,
              b->size, size);
    errno = EIO;
    return -1;
  }
  return h->relock ? rbd_lock (b) : 0;
}

void
rbd_disconnect (struct rbd_backend *h)
{
  if (h->image) {
    int r = h->lib->rbd_close (h->image);

    if (r < 0) {
      errno = -r;
      dc_error ("backend %s: close: %m", h->b.identity.name);
    }
  }
  if (h->ioctx)
    h->lib->rados_ioctx_destroy (h->ioctx);
  if (h->cluster)
    h->lib->rados_shutdown (h->cluster);
  h->image = NULL;
  h->ioctx = NULL;
  h->cluster = NULL;
}

/* Whether the client at addr watches the image: a live client does; a
 * dead one's watch expires (osd_client_watch_timeout, 30 s by default),
 * and then librbd breaks its lock when we ask for it.
 */
static bool
watching (struct rbd_backend *h, const char *addr)
{
  rbd_image_watcher_t w[RBD_MAX_CLIENTS];
  size_t n = RBD_MAX_CLIENTS;
  bool found = false;

  if (h->lib->rbd_watchers_list (h->image, w, &n) < 0)
    return true;                /* cannot tell: take it as alive */
  for (size_t i = 0; i < n && !found; i++)
    found = strcmp (w[i].addr, addr) == 0;
  h->lib->rbd_watchers_list_cleanup (w, n);
  return found;
}

/* The first live owner of the lock into buf (empty if none). */
static void
live_owner (struct rbd_backend *h, char *buf, size_t len)
{
  char *owners[RBD_MAX_CLIENTS];
  size_t n = RBD_MAX_CLIENTS;
  rbd_lock_mode_t mode;

  buf[0] = '\0';
  if (h->lib->rbd_lock_get_owners (h->image, &mode, owners, &n) < 0)
    return;                     /* -ENOENT: no owner */
  for (size_t i = 0; i < n; i++) {
    if (buf[0] == '\0' && watching (h, owners[i]))
      snprintf (buf, len, "%s", owners[i]);
    else if (buf[0] == '\0')
      dc_debug ("backend %s: the lock of %s, who no longer watches the "
                "image, will be broken", h->b.identity.name, owners[i]);
  }
  h->lib->rbd_lock_get_owners_cleanup (owners, n);
}

static int
in_use (struct rbd_backend *h, const char *owner)
{
  char who[1024] = "an unknown client";

  if (owner)
    rbd_holder_describe (h, owner, who, sizeof who);
  dc_error ("backend=%s: in use: the image's exclusive lock is held by %s: "
            "stop it first, or add locking=off to share the image at your "
            "own risk (librbd then hands the lock to each writer in turn)",
            h->b.identity.name, who);
  errno = EAGAIN;
  return -1;
}

/* librbd's rbd_lock_acquire asks a holder that took the lock on its own
 * (qemu-nbd, a kernel mapping, any writer under librbd's default policy)
 * to hand it over, and gets it: that is stealing a served image from
 * under its server.  So look first, and refuse if a live client holds
 * it.  A holder that took it as we do (rbd_lock_acquire, as a second
 * discardcache) refuses to hand it over, and so do we once we hold it.
 */
int
rbd_lock (struct backend *b)
{
  struct rbd_backend *h = (struct rbd_backend *) b;
  char owner[256];
  int r;

  if (b->limits.read_only) {
    dc_debug ("backend %s: read-only: no lock taken", b->identity.name);
    return 0;
  }
  if (!(h->features & RBD_FEATURE_EXCLUSIVE_LOCK)) {
    dc_error ("backend=%s: the image has no exclusive-lock feature, so "
              "nothing keeps a second writer off it: enable it (rbd feature "
              "enable %s/%s exclusive-lock), or serve it with locking=off",
              b->identity.name, h->spec.pool, h->spec.image);
    errno = EINVAL;
    return -1;
  }
  live_owner (h, owner, sizeof owner);
  if (owner[0] && !rbd_holder_is_ours (h, owner))
    return in_use (h, owner);
  if (owner[0] && rbd_holder_fence (h, owner) == -1)
    return -1;
  r = h->lib->rbd_lock_acquire (h->image, RBD_LOCK_MODE_EXCLUSIVE);
  if (r == -EROFS || r == -EBUSY || r == -EAGAIN) {
    live_owner (h, owner, sizeof owner);
    return in_use (h, owner[0] ? owner : NULL);
  }
  if (r < 0)
    return start_fail (h, r, "cannot take the image's exclusive lock");
  h->locked = true;
  rbd_holder_record (h);
  dc_debug ("backend %s: exclusive lock taken", b->identity.name);
  return 0;
}
