/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the state file on disk (invariant 4).  Written only at a
 * clean stop, atomically (FILE.tmp, fsync, rename, fsync the directory);
 * at the next start it is checked against the backend and consumed
 * (removed, the directory fsynced) before the first request is served,
 * so after a crash there is nothing left to replay.  A file that does
 * not match or does not check out is renamed to FILE.rejected and never
 * applied.  It carries the pending extents and the known-clean map
 * (invariant 9) under the same rules.  The format is in state.c.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arith.h"
#include "cleanup.h"
#include "engine-internal.h"
#include "fileio.h"
#include "log.h"
#include "state.h"

/* Anything larger is not one of ours: 1M extents take a few MiB. */
#define STATE_MAX_FILE (UINT64_C (1) << 30)

/* A regular file's modification time tells whether something else wrote
 * it between our stop and our start; 0 if unknown or not a file.
 */
static uint64_t
file_mtime_ns (const struct backend_identity *b)
{
  struct stat st;

  if (strcmp (b->kind, "file") != 0 || stat (b->name, &st) == -1 ||
      st.st_dev != b->dev || st.st_ino != b->ino)
    return 0;
  return (uint64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

void
engine_state_identity (const struct engine *e, struct state_identity *id)
{
  const struct backend_identity *b = &e->saved_identity;

  memset (id, 0, sizeof *id);
  snprintf (id->kind, sizeof id->kind, "%s", b->kind);
  id->dev = b->dev;
  id->ino = b->ino;
  id->size = backend_size (e->backend);
  id->granularity = e->granularity;
  id->mtime_ns = file_mtime_ns (backend_identity (e->backend));
  snprintf (id->name, sizeof id->name, "%s", b->name);
}

/* Saving. */

static int
or_bits (const struct extent *x, void *opaque)
{
  *(uint64_t *) opaque |= x->offset | x->length;
  return 0;
}

static int
encode_pending (const struct extent *x, void *opaque)
{
  return state_encoder_add (opaque, STATE_PENDING, x->offset, x->length);
}

static int
encode_clean (const struct extent *x, void *opaque)
{
  return state_encoder_add (opaque, STATE_CLEAN, x->offset, x->length);
}

/* The largest power of two dividing every offset and length seen. */
static uint64_t
unit_of (uint64_t bits)
{
  return bits ? bits & -bits : 1;
}

/* Two passes over each map: the first finds the unit (the largest power
 * of two dividing every offset and length), so the varints count in it.
 */
int
engine_state_encode_locked (struct engine *e, bool stamp_mtime, void **image,
                            size_t *len)
  REQUIRES (engine_lock)
{
  struct state_encoder *enc;
  struct state_identity id;
  uint64_t bits = 0, clean_bits = 0;
  int r = -1;

  extmap_iterate (e->map, 0, or_bits, &bits);
  clean_iterate (&e->clean, or_bits, &clean_bits);
  enc = state_encoder_new (unit_of (bits), unit_of (clean_bits));
  if (enc == NULL)
    return -1;
  engine_state_identity (e, &id);
  if (!stamp_mtime)
    id.mtime_ns = 0;
  if (extmap_iterate (e->map, 0, encode_pending, enc) == 0 &&
      clean_iterate (&e->clean, encode_clean, enc) == 0)
    r = state_encoder_finish (enc, &id, image, len);
  state_encoder_free (enc);
  return r;
}

int
engine_state_write (const char *path, const void *image, size_t len)
{
  struct fileio_buffer buf = { .data = image, .len = len };
  const char *step;

  if (fileio_replace (path, 0600, FILEIO_DIR_SOFT, fileio_write_buffer, &buf,
                      &step) == 0) {
    if (step != NULL)
      dc_error ("state=%s: cannot %s: %m (saved, maybe not durable)", path,
                step);
    return 0;
  }
  dc_error ("state=%s: cannot %s %s.tmp: %m", path, step, path);
  return -1;
}

int
engine_state_save (struct engine *e)
{
  CLEANUP_FREE void *image = NULL;
  size_t len, n;
  uint64_t bytes, clean_n, clean_b;
  const char *path = engine_keys (e)->state;
  int r;

  engine_lock_acquire (e);
  n = extmap_count (e->map);
  bytes = extmap_bytes (e->map);
  clean_n = clean_extents (&e->clean);
  clean_b = clean_bytes (&e->clean);
  r = n || clean_n ? engine_state_encode_locked (e, true, &image, &len) : 0;
  engine_lock_release (e);
  if (n == 0 && clean_n == 0) {
    dc_debug ("state=%s: nothing pending or known clean, no state file "
              "written", path);
    return 0;
  }
  if (r == -1 || engine_state_write (path, image, len) == -1)
    return -1;
  dc_debug ("state=%s: saved %zu pending extents (%" PRIu64 " bytes) and %"
            PRIu64 " known-clean extents (%" PRIu64 " bytes) in %zu bytes",
            path, n, bytes, clean_n, clean_b, len);
  return 0;
}

/* Loading. */

/* 1 with the contents, 0 if there is no file, -1 (reported) otherwise;
 * a file too large to be ours is read as its first bytes only, which
 * the header check then refuses.
 */
int
engine_state_read (const char *path, unsigned char **buf, size_t *len)
{
  struct stat st;
  ssize_t n;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

  if (fd == -1 && errno == ENOENT)
    return 0;
  if (fd == -1 || fstat (fd, &st) == -1) {
    dc_error ("state=%s: %m: cannot read it, and it must not be left to be "
              "replayed later; fix or remove it", path);
    if (fd >= 0)
      close (fd);
    return -1;
  }
  if (!S_ISREG (st.st_mode)) {
    dc_error ("state=%s: not a regular file: expected the path of a state "
              "file (or none yet)", path);
    close (fd);
    errno = EINVAL;
    return -1;
  }
  *len = MIN ((uint64_t) st.st_size, STATE_MAX_FILE);
  *buf = malloc (*len ? *len : 1);
  n = *buf ? pread (fd, *buf, *len, 0) : -1;
  if (n == -1)
    dc_error ("state=%s: read: %m", path);
  close (fd);
  if (n == -1)
    return -1;
  *len = n;
  return 1;
}

/* Set a refused file aside so that it is never applied, even to the
 * backend it was made for, once that backend may have been written.
 */
int
engine_state_reject (const char *path, const char *why)
{
  CLEANUP_FREE char *aside = NULL;

  if (asprintf (&aside, "%s.rejected", path) == -1) {
    dc_error ("state=%s: out of memory", path);
    return -1;
  }
  if (rename (path, aside) == -1 || fsync_dir (path) == -1) {
    dc_error ("state=%s: refused (%s), and cannot rename it to %s: %m; "
              "remove it", path, why, aside);
    return -1;
  }
  dc_error ("state=%s: refused, nothing applied: %s (renamed to %s)",
            path, why, aside);
  return 0;
}

struct apply {
  struct engine *e;
  uint32_t ticks;
};


/* Loaded extents are queued now, so they wait their delay again; known
 * clean ones are clean again (or forgotten at the bound, or dropped with
 * the map off).
 */
static int
apply_one (enum state_list list, uint64_t offset, uint64_t length,
           void *opaque)
  REQUIRES (engine_lock)
{
  struct apply *a = opaque;
  struct engine *e = a->e;

  if (list == STATE_CLEAN)
    clean_discarded (&e->clean, offset, length);
  else if (extmap_insert (e->map, offset, length, a->ticks) == -1) {
    e->stats.dropped++;
    e->stats.dropped_bytes += length;
    e->stats.dropped_nomem_bytes += length;
  }
  return 0;
}

void
engine_state_apply_locked (struct engine *e, const void *image,
                           const struct state_header *h)
  REQUIRES (engine_lock)
{
  struct apply a = { .e = e, .ticks = engine_ticks_locked (e) };
  char why[8];

  state_decode_extents (image, h, apply_one, &a, why, sizeof why);
  e->stats.state_loaded_extents = h->count;
  e->stats.state_loaded_bytes = h->bytes;
  e->stats.state_loaded_clean_extents = h->clean_count;
  e->stats.state_loaded_clean_bytes = h->clean_bytes;
}

int
engine_state_load (struct engine *e)
{
  const char *path = engine_keys (e)->state;
  CLEANUP_FREE unsigned char *buf = NULL;
  struct state_identity now;
  struct state_header h;
  char why[512];
  size_t len;
  int r;

  if (backend_limits (e->backend)->read_only) {
    dc_debug ("state=%s: read-only, not loaded (a writable start consumes it)",
              path);
    return 0;
  }
  r = engine_state_read (path, &buf, &len);
  if (r <= 0) {
    if (r == 0)
      dc_debug ("state=%s: no state file, nothing to load", path);
    return r;
  }
  engine_state_identity (e, &now);
  if (state_read_header (buf, len, &h, why, sizeof why) == -1 ||
      state_check_identity (&h, &now, why, sizeof why) == -1 ||
      state_decode_extents (buf, &h, NULL, NULL, why, sizeof why) == -1)
    return engine_state_reject (path, why);
  if (unlink (path) == -1 || fsync_dir (path) == -1) {
    dc_error ("state=%s: cannot remove it after reading it: %m; not serving, "
              "as a crash would replay it later", path);
    return -1;
  }
  engine_lock_acquire (e);
  engine_state_apply_locked (e, buf, &h);
  engine_enforce_bound_drops_lock (e);
  engine_lock_release (e);
  dc_debug ("state=%s: loaded %" PRIu64 " pending extents (%" PRIu64
            " bytes) and %" PRIu64 " known-clean extents (%" PRIu64 " bytes) "
            "from a version %" PRIu32 " file, and removed the file", path,
            h.count, h.bytes, h.clean_count, h.clean_bytes, h.version);
  return 0;
}
