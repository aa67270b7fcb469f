/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the volume interface (volume.h): open the kind the
 * config asks for, then dispatch each call to it.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "arith.h"
#include "log.h"
#include "volume-internal.h"

struct volume *
volume_open (struct engine *e, const struct volume_config *cfg)
{
  return cfg->thin ? thin_volume_open (e, cfg) : identity_volume_open (e);
}

void
volume_close (struct volume *v)
{
  if (v)
    v->ops->close (v);
}

uint64_t
volume_size (const struct volume *v)
{
  return v->size;
}

const struct backend_limits *
volume_limits (const struct volume *v)
{
  return &v->limits;
}

uint64_t
volume_granularity (const struct volume *v)
{
  return engine_granularity (v->engine);
}

int
volume_pread (struct volume *v, void *buf, uint32_t count, uint64_t offset)
{
  return v->ops->pread (v, buf, count, offset);
}

int
volume_pwrite (struct volume *v, const void *buf, uint32_t count,
               uint64_t offset, bool fua)
{
  return v->ops->pwrite (v, buf, count, offset, fua);
}

int
volume_zero (struct volume *v, uint64_t offset, uint64_t length,
             bool may_trim, bool fua, bool fast)
{
  return v->ops->zero (v, offset, length, may_trim, fua, fast);
}

int
volume_trim (struct volume *v, uint64_t offset, uint64_t length, bool fua)
{
  return v->ops->trim (v, offset, length, fua);
}

int
volume_flush (struct volume *v)
{
  return v->ops->flush (v);
}

int
volume_extents (struct volume *v, uint64_t offset, uint64_t length,
                backend_extent_fn fn, void *opaque)
{
  return v->ops->extents (v, offset, length, fn, opaque);
}

void
volume_get_stats (struct volume *v, struct volume_stats *st)
{
  memset (st, 0, sizeof *st);
  engine_get_stats (v->engine, &st->engine);
  v->ops->stats (v, st);
}

int
volume_release_reserve (struct volume *v)
{
  return v->ops->release_reserve ? v->ops->release_reserve (v) : 0;
}

ssize_t
volume_dump_map_batch (struct volume *v, uint64_t from,
                       struct volume_map_run *runs, size_t max)
{
  if (v->ops->dump_map_batch == NULL) {
    errno = ENOTSUP;
    return -1;
  }
  return v->ops->dump_map_batch (v, from, runs, max);
}
