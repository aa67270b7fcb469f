/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what each kind of volume implements (identity.c,
 * thin/thin.c) behind volume.h, and the helpers they share.
 */
#ifndef DISCARDCACHE_VOLUME_INTERNAL_H
#define DISCARDCACHE_VOLUME_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "engine.h"
#include "volume.h"

/* Each takes volume.h's semantics; a kind embeds struct volume first. */
struct volume_ops {
  const char *name;
  int (*pread) (struct volume *v, void *buf, uint32_t count, uint64_t offset);
  int (*pwrite) (struct volume *v, const void *buf, uint32_t count,
                 uint64_t offset, bool fua);
  int (*zero) (struct volume *v, uint64_t offset, uint64_t length,
               bool may_trim, bool fua, bool fast);
  int (*trim) (struct volume *v, uint64_t offset, uint64_t length, bool fua);
  int (*flush) (struct volume *v);
  int (*extents) (struct volume *v, uint64_t offset, uint64_t length,
                  backend_extent_fn fn, void *opaque);
  /* Fill the volume's own part of st (the engine's is filled already). */
  void (*stats) (struct volume *v, struct volume_stats *st);
  /* NULL: not a mapping volume (ENOTSUP). */
  ssize_t (*dump_map_batch) (struct volume *v, uint64_t from,
                             struct volume_map_run *runs, size_t max);
  /* NULL: the volume keeps no free space of its own (0). */
  int (*release_reserve) (struct volume *v);
  /* NULL: nothing to do without client input (0). */
  int (*tick) (struct volume *v);
  void (*close) (struct volume *v);
};

struct volume {
  const struct volume_ops *ops;
  struct engine *engine;           /* below; not owned */
  uint64_t size;                   /* exported */
  struct backend_limits limits;    /* as exported */
};

/* Whether [offset, offset+length) lies within the exported disk (and,
 * for a write, the volume is writable).  0, or -1 with errno (EINVAL
 * reported; EROFS silent, as the engine's).
 */
extern int volume_check_range (const struct volume *v, uint64_t offset,
                               uint64_t length, bool write);

/* The kinds. */
extern struct volume *identity_volume_open (struct engine *e);
extern struct volume *thin_volume_open (struct engine *e,
                                        const struct volume_config *cfg);

#endif /* DISCARDCACHE_VOLUME_INTERNAL_H */
