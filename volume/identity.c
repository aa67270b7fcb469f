/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the identity volume: the exported disk is the backend,
 * every request goes to the engine as it is.
 */
#include <config.h>

#include <stdlib.h>

#include "log.h"
#include "volume-internal.h"

static int
identity_pread (struct volume *v, void *buf, uint32_t count, uint64_t offset)
{
  return engine_pread (v->engine, buf, count, offset);
}

static int
identity_pwrite (struct volume *v, const void *buf, uint32_t count,
                 uint64_t offset, bool fua)
{
  return engine_pwrite (v->engine, buf, count, offset, fua);
}

static int
identity_zero (struct volume *v, uint64_t offset, uint64_t length,
               bool may_trim, bool fua, bool fast)
{
  return engine_zero (v->engine, offset, length, may_trim, fua, fast);
}

static int
identity_trim (struct volume *v, uint64_t offset, uint64_t length, bool fua)
{
  return engine_trim (v->engine, offset, length, fua);
}

static int
identity_flush (struct volume *v)
{
  return engine_flush (v->engine);
}

static int
identity_extents (struct volume *v, uint64_t offset, uint64_t length,
                  backend_extent_fn fn, void *opaque)
{
  return engine_extents (v->engine, offset, length, fn, opaque);
}

static void
identity_stats (struct volume *v, struct volume_stats *st)
{
  st->thin = false;
}

static void
identity_close (struct volume *v)
{
  free (v);
}

static const struct volume_ops identity_ops = {
  .name = "identity",
  .pread = identity_pread,
  .pwrite = identity_pwrite,
  .zero = identity_zero,
  .trim = identity_trim,
  .flush = identity_flush,
  .extents = identity_extents,
  .stats = identity_stats,
  .close = identity_close,
};

struct volume *
identity_volume_open (struct engine *e)
{
  struct volume *v = calloc (1, sizeof *v);

  if (v == NULL) {
    dc_error ("volume: out of memory");
    return NULL;
  }
  v->ops = &identity_ops;
  v->engine = e;
  v->size = engine_size (e);
  v->limits = *engine_limits (e);
  return v;
}
