/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: opening and closing a thin volume (see thin-volume.h):
 * its geometry (slot=auto, the slot against the backend), the struct
 * and its ops table, the journal's checkpoint limit, and its
 * statistics and map dump for the control socket.  The data path is
 * thin.c, the meta file thin-meta.c.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arith.h"
#include "clock.h"
#include "engine.h"
#include "le.h"
#include "log.h"
#include "thin-internal.h"
#include "thin-volume.h"

void
thin_set_journal_limit (struct volume *v, uint64_t bytes)
{
  struct thin *t = thin_of (v);

  thin_commit_lock_acquire (t);
  t->journal_limit = bytes;
  t->journal_per_run = 0;
  thin_commit_lock_release (t);
}

/* Statistics. */

static void
thin_stats (struct volume *v, struct volume_stats *vst)
{
  struct thin *t = thin_of (v);
  struct thin_stats *st = &vst->th;
  struct thin_space_stats sp;

  thin_lock_acquire (t);
  thin_reap_locked (t, REAP_ON_STATS);
  thin_space_get_stats (&t->space, &sp);
  vst->thin = true;
  st->slot = t->slot;
  st->size = t->v.size;
  st->slots = t->map.nphys;
  st->trims = t->trims;
  st->trim_bytes = t->trim_bytes;
  st->mapped = t->map.mapped;
  st->mapped_runs = thin_map_runs (&t->map);
  st->free_undurable = t->undurable_slots;
  st->reserve_limit = t->reserve_limit << t->shift;
  st->reserve_bytes = sp.reserve << t->shift;
  st->reserve_runs = sp.reserve_runs;
  st->reserve_writes = t->reserve_writes;
  st->discards_avoided = t->avoided;
  st->discards_avoided_bytes = t->avoided_slots << t->shift;
  st->reserve_released = t->released;
  st->reserve_released_bytes = t->released_slots << t->shift;
  st->free_pending = sp.pending;
  st->free_pending_runs = sp.pending_runs;
  st->free_pending_largest = sp.pending_largest;
  st->free_clean = sp.clean;
  st->free_clean_runs = sp.clean_runs;
  st->free_zero = sp.zero;
  st->map_bytes = thin_map_memory (&t->map);
  st->memory_bytes = st->map_bytes + sp.memory + t->bufcap + t->takencap;
  st->allocated = t->allocated;
  st->reused = t->reused;
  st->enospc = t->enospc;
  st->zero_fills = t->zero_fills;
  st->commits = t->commits;
  st->journal_bytes = t->meta_bytes;
  st->checkpoints = t->checkpoints;
  st->last_checkpoint = t->last_checkpoint;
  thin_lock_release (t);
}

static ssize_t
thin_dump_map_batch (struct volume *v, uint64_t from,
                     struct volume_map_run *runs, size_t max)
{
  struct thin *t = thin_of (v);
  struct extent x;
  size_t n = 0;

  thin_lock_acquire (t);
  for (; n < max && extmap_find_from (t->map.runs, from, &x); n++) {
    uint64_t l = MAX (from, x.offset);

    /* A run's value is its physical start. */
    runs[n] = (struct volume_map_run) {
      .logical = l, .physical = x.value + (l - x.offset),
      .length = x.offset + x.length - l,
    };
    from = x.offset + x.length;
  }
  thin_lock_release (t);
  return n;
}

/* Opening. */

/* slot=auto: the slot size of an existing meta file (both format
 * versions hold it at offset 16), else the discard granularity, at
 * least 4 KiB: the block of the common filesystems, so that they free
 * whole slots, where a larger slot leaves parts of slots pending that
 * no reuse can cancel (docs/design-notes.md, "Thin mode").
 */
static uint64_t
auto_slot (struct engine *e, const char *meta)
{
  unsigned char h[24];
  uint64_t slot = 0;
  int fd = open (meta, O_RDONLY | O_CLOEXEC);

  if (fd >= 0) {
    if (pread (fd, h, sizeof h, 0) == (ssize_t) sizeof h &&
        memcmp (h, "DCTHIN\0\0", 8) == 0)
      slot = get64 (h + 16);
    close (fd);
  }
  if (is_power_of_2 (slot) && slot >= 512 && slot <= (UINT64_C (1) << 30))
    return slot;
  return MAX (UINT64_C (4096), engine_granularity (e));
}

/* The slot against the backend, and the pool's size. */
static int
check_geometry (struct engine *e, struct thin *t)
{
  uint64_t bsize = engine_size (e);

  if (t->slot < engine_granularity (e)) {
    dc_error ("slot=%" PRIu64 ": must be at least the discard granularity, "
              "%" PRIu64 " bytes (a smaller slot could never be discarded)",
              t->slot, engine_granularity (e));
    return -1;
  }
  if (bsize / t->slot == 0 || bsize / t->slot > THIN_MAX_PHYS) {
    dc_error ("slot=%" PRIu64 ": the backend's %" PRIu64 " bytes must hold "
              "from 1 to %" PRIu32 " slots", t->slot, bsize, THIN_MAX_PHYS);
    return -1;
  }
  return 0;
}

/* reserve=, in slots.  The default, the larger of 64 MiB and 1% of the
 * export, holds what an XFS churn frees in its last round on the
 * benchmark's 1 GiB disk (docs/design-notes.md, "The reuse reserve").
 */
#define RESERVE_DEFAULT_MIN (UINT64_C (64) << 20)
#define RESERVE_DEFAULT_HUNDREDTHS 100

static uint64_t
reserve_slots (const struct volume_config *cfg, uint64_t size, unsigned shift)
{
  uint64_t hundredths = cfg->reserve_percent ? cfg->reserve
                        : RESERVE_DEFAULT_HUNDREDTHS;
  uint64_t part = size / 10000 * hundredths +
                  size % 10000 * hundredths / 10000;

  if (cfg->reserve == VOLUME_RESERVE_AUTO)
    return MAX (RESERVE_DEFAULT_MIN, part) >> shift;
  return (cfg->reserve_percent ? part : cfg->reserve) >> shift;
}

static const struct volume_ops thin_ops;

static struct thin *
thin_new (struct engine *e, const struct volume_config *cfg)
  NO_THREAD_SAFETY_ANALYSIS
{
  struct thin *t = calloc (1, sizeof *t);

  if (t == NULL || (t->path = strdup (cfg->meta)) == NULL) {
    free (t);
    dc_error ("thin: out of memory");
    return NULL;
  }
  t->v.ops = &thin_ops;
  t->v.engine = t->e = e;
  t->v.size = cfg->size ? cfg->size : engine_size (e);
  t->v.limits = *engine_limits (e);
  t->v.limits.can_extents = true;
  t->fd = -1;
  t->slot = cfg->slot ? cfg->slot : auto_slot (e, cfg->meta);
  t->shift = __builtin_ctzll (t->slot);
  t->reserve_limit = reserve_slots (cfg, t->v.size, t->shift);
  t->read_only = t->v.limits.read_only;
  t->journal_limit = JOURNAL_LIMIT;
  t->journal_per_run = JOURNAL_PER_RUN;
  for (unsigned i = 0; i < THIN_ACTIVE_TAILS; i++)
    t->tails[i] = THIN_MAX_PHYS;
  t->id.slot = t->slot;
  t->id.size = t->v.size;
  t->id.backend_size = engine_size (e);
  t->id.backend = *engine_saved_identity (e);
  pthread_mutex_init (&t->lock, NULL);
  pthread_mutex_init (&t->commit_lock, NULL);
  monotonic_cond_init (&t->changed);
  return t;
}

static void
thin_free (struct thin *t)
  NO_THREAD_SAFETY_ANALYSIS
{
  thin_map_free (&t->map);
  thin_space_free (&t->space);
  if (t->fd >= 0)
    close (t->fd);
  pthread_cond_destroy (&t->changed);
  pthread_mutex_destroy (&t->commit_lock);
  pthread_mutex_destroy (&t->lock);
  free (t->undurable);
  free (t->buf);
  free (t->taken);
  free (t->path);
  free (t);
}

static void
thin_close (struct volume *v)
{
  struct thin *t = thin_of (v);

  thin_meta_close (t);
  thin_free (t);
}

static const struct volume_ops thin_ops = {
  .name = "thin",
  .pread = thin_pread,
  .pwrite = thin_pwrite,
  .zero = thin_zero,
  .trim = thin_trim,
  .flush = thin_flush,
  .extents = thin_extents,
  .stats = thin_stats,
  .dump_map_batch = thin_dump_map_batch,
  .release_reserve = thin_release_reserve,
  .tick = thin_tick,
  .close = thin_close,
};

struct volume *
thin_volume_open (struct engine *e, const struct volume_config *cfg)
{
  struct thin *t;

  if (cfg->meta == NULL) {
    dc_error ("thin=on needs meta=FILE");
    errno = EINVAL;
    return NULL;
  }
  if ((t = thin_new (e, cfg)) == NULL)
    return NULL;
  if (check_geometry (e, t) == -1) {
    thin_free (t);
    errno = EINVAL;
    return NULL;
  }
  if (thin_map_init (&t->map, (t->v.size + t->slot - 1) >> t->shift,
                     engine_size (e) >> t->shift) == -1 ||
      thin_space_init (&t->space) == -1 || thin_meta_open (t) == -1) {
    int saved_errno = errno;

    thin_free (t);
    errno = saved_errno;
    return NULL;
  }
  return &t->v;
}
