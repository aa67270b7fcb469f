/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume's meta file on disk (the format is in
 * thin-journal.c): records are buffered in memory and appended by a
 * commit after the backend is flushed, so a durable mapping always
 * points at flushed data; a checkpoint of the durable map replaces the
 * journal when it grows; at start the file is recovered, a version 1
 * file converted, and the free space sorted out.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "arith.h"
#include "cleanup.h"
#include "fileio.h"
#include "grow.h"
#include "log.h"
#include "thin-internal.h"
#include "thin-order.h"
#include "verify.h"

/* The largest meta file we load. */
#define META_MAX (UINT64_C (1) << 32)

/* Records. */

int
thin_reserve_records_locked (struct thin *t, size_t n)
{
  while (t->buflen + n * THIN_RECORD_SIZE > t->bufcap) {
    void *p = grow_array (t->buf, &t->bufcap, 1, 64 * THIN_RECORD_SIZE);

    if (p == NULL)
      goto nomem;
    t->buf = p;
  }
  while (t->nundurable + n > t->capundurable) {
    void *p = grow_array (t->undurable, &t->capundurable,
                          sizeof *t->undurable, 64);

    if (p == NULL)
      goto nomem;
    t->undurable = p;
  }
  return 0;

 nomem:
  dc_error ("thin: out of memory for the journal");
  errno = ENOMEM;
  return -1;
}

uint64_t
thin_append_record_locked (struct thin *t, uint32_t type, uint64_t l,
                           uint64_t n, uint32_t p)
{
  struct thin_record r = {
    .type = type, .count = (uint32_t) n, .seq = t->next_seq++,
    .logical = l, .phys = p,
  };

  DEBUG_VERIFY_HELD (&t->lock);
  /* thin_reserve_records_locked made room: past it is the heap. */
  VERIFY3U (t->buflen + THIN_RECORD_SIZE, <=, t->bufcap);
  /* Recovery refuses a record of no slots or beyond the store, and with
   * it the rest of the journal.
   */
  VERIFY3U (n, >=, 1);
  VERIFY3U (n, <=, UINT32_MAX);
  VERIFY3U ((uint64_t) p + n, <=, t->map.nphys);
  thin_record_encode (&r, t->buf + t->buflen);
  t->buflen += THIN_RECORD_SIZE;
  return r.seq;
}

/* The meta file. */

/* Write a checkpoint image to meta.tmp, make it durable and rename it
 * over meta: the old file (checkpoint + journal) stays whole until the
 * new one replaces it.  Returns the new file's descriptor, locked.
 */
static int
lock_and_fill (int fd, void *opaque)
{
  if (flock (fd, LOCK_EX | LOCK_NB) == -1)
    return -1;
  return fileio_write_buffer (fd, opaque);
}

static int
write_meta_file (struct thin *t, const void *image, size_t len)
{
  struct fileio_buffer buf = { .data = image, .len = len };
  const char *step;
  int fd = fileio_replace (t->path, 0600, FILEIO_KEEP_FD, lock_and_fill, &buf,
                           &step);

  if (fd == -1)
    dc_error ("meta=%s: cannot write a checkpoint: cannot %s: %m", t->path, step);
  return fd;
}

struct copy {
  struct extmap *to;
  int err;
};

static int
copy_run (const struct extent *x, void *opaque)
{
  struct copy *c = opaque;

  return extmap_insert (c->to, x->offset, x->length, x->value) == -1 ? -1 : 0;
}

/* Undo the records of buf[0, len) on map to, newest first. */
static int
undo_records (struct extmap *to, const unsigned char *buf, size_t len)
{
  for (size_t off = len; off > 0; off -= THIN_RECORD_SIZE) {
    struct thin_record r;
    int err;

    thin_record_decode (buf + off - THIN_RECORD_SIZE, &r);
    if (r.type == THIN_REC_RELEASE)
      continue;
    err = r.type == THIN_REC_MAP
          ? extmap_remove (to, r.logical, r.count, NULL)
          : extmap_insert (to, r.logical, r.count, r.phys);
    if (err == -1)
      return -1;
  }
  return 0;
}

/* The durable map: a copy of the map with the buffered (not yet
 * durable) records undone, newest first: the buffer's, then those a
 * failed commit left taken.  Slots being set up are not in the map yet.
 * Lock held; the caller holds commit_lock, so no commit is writing.
 * O(runs) under the lock, once a checkpoint.
 */
static struct extmap *
durable_map_locked (struct thin *t)
  REQUIRES (thin_commit_lock, thin_lock)
{
  struct copy c = { .to = extmap_new_runs () };

  if (c.to == NULL || extmap_iterate (t->map.runs, 0, copy_run, &c) != 0 ||
      undo_records (c.to, t->buf, t->buflen) == -1 ||
      undo_records (c.to, t->taken, t->takenlen) == -1)
    goto nomem;
  return c.to;

 nomem:
  extmap_free (c.to);
  return NULL;
}

/* The reserve as of the durable records: the reserve now, with the runs
 * released from it whose slots are not free yet (their RELEASE record
 * may not be durable; if it is, the reserve after a crash holds them
 * again and discards them twice, which costs a command, never data).
 * Slots taken from the reserve by writes whose MAP record is not
 * durable are not in it: after a crash they are clean, holding what was
 * written (at most the records buffered).  Lock held.
 */
static struct extmap *
durable_reserve_locked (struct thin *t)
  REQUIRES (thin_lock)
{
  struct copy c = { .to = extmap_new () };

  if (c.to == NULL ||
      extmap_iterate (thin_space_reserve_runs (&t->space), 0, copy_run,
                      &c) != 0)
    goto nomem;
  for (size_t i = 0; i < t->nundurable; i++)
    if (t->undurable[i].type == THIN_REC_RELEASE &&
        extmap_insert (c.to, t->undurable[i].p, t->undurable[i].n, 0) == -1)
      goto nomem;
  return c.to;

 nomem:
  extmap_free (c.to);
  return NULL;
}

/* Replace the journal by a checkpoint of the durable map.  commit_lock
 * held.  A failure is reported and the journal simply goes on.
 */
static int
checkpoint (struct thin *t)
  REQUIRES (thin_commit_lock)
{
  uint64_t next_seq, now = (uint64_t) time (NULL);
  struct extmap *runs, *reserve;
  void *image;
  size_t len;
  int fd, r;

  thin_lock_acquire (t);
  runs = durable_map_locked (t);
  reserve = durable_reserve_locked (t);
  next_seq = t->durable_seq + 1;
  thin_lock_release (t);
  if (runs == NULL || reserve == NULL) {
    extmap_free (runs);
    extmap_free (reserve);
    dc_error ("meta=%s: out of memory for a checkpoint", t->path);
    return -1;
  }
  r = thin_checkpoint_encode (&t->id, runs, reserve, next_seq, now, &image,
                              &len);
  extmap_free (runs);
  extmap_free (reserve);
  if (r == -1)
    return -1;
  fd = write_meta_file (t, image, len);
  free (image);
  if (fd == -1)
    return -1;
  if (t->fd >= 0)
    close (t->fd);
  t->fd = fd;
  t->journal_end = len;
  thin_lock_acquire (t);
  t->checkpoints++;
  t->last_checkpoint = now;
  t->meta_bytes = len;
  thin_lock_release (t);
  return 0;
}

/* Records up to upto are durable: the runs they unmapped (or released
 * from the reserve) whose discard is recorded join the pending free
 * set, and the runs they kept the reserve, in the order they were
 * unmapped; the others stay (their discard is still on its way).
 */
static void
release_undurable_locked (struct thin *t, uint64_t upto)
  REQUIRES (thin_lock)
{
  size_t kept = 0;

  for (size_t i = 0; i < t->nundurable; i++) {
    struct thin_undurable u = t->undurable[i];

    if (u.seq <= upto && u.recorded) {
      if (u.type == THIN_REC_KEEP)
        thin_space_add_reserve (&t->space, u.p, u.n);
      else
        thin_space_add_pending (&t->space, u.p, u.n);
      t->undurable_slots -= u.n;
    }
    else
      t->undurable[kept++] = u;
  }
  t->nundurable = kept;
}

/* Take the buffered records for a commit: they move to the taken
 * buffer, and the buffer goes on empty (the two swap: nothing is copied
 * under the lock).  Records a failed commit left there stay in front,
 * the new ones are appended to them (a copy only after a failure).
 * Lock and commit_lock held.  0, or -1 (ENOMEM, reported; nothing
 * moved).
 */
static int
take_records_locked (struct thin *t)
  REQUIRES (thin_commit_lock, thin_lock)
{
  unsigned char *p;
  size_t cap;

  if (t->takenlen == 0) {
    p = t->taken, cap = t->takencap;
    t->taken = t->buf, t->takencap = t->bufcap, t->takenlen = t->buflen;
    t->buf = p, t->bufcap = cap, t->buflen = 0;
    return 0;
  }
  while (t->takenlen + t->buflen > t->takencap) {
    p = grow_array (t->taken, &t->takencap, 1, 64 * THIN_RECORD_SIZE);
    if (p == NULL) {
      dc_error ("thin: out of memory committing the journal");
      errno = ENOMEM;
      return -1;
    }
    t->taken = p;
  }
  memcpy (t->taken + t->takenlen, t->buf, t->buflen);
  t->takenlen += t->buflen;
  t->buflen = 0;
  return 0;
}

/* A commit, commit_lock held (and released on return).  The taken
 * records are written without the lock (only a commit touches them, and
 * a checkpoint, which also holds commit_lock); a failed commit leaves
 * them taken, in front of the records appended since, for the next.
 */
static int
commit_and_release_lock (struct thin *t, bool client_flush)
  RELEASE (thin_commit_lock)
{
  const unsigned char *records;
  uint64_t upto, limit = 0;
  bool over = false, frees;
  unsigned parity = 0;
  size_t len;
  int r;

  thin_lock_acquire (t);
  r = take_records_locked (t);
  records = t->taken;
  len = t->takenlen;
  upto = t->next_seq - 1;
  /* Unmapped runs this commit may free: reads that began before now
   * may still hold their old mapping (thin-order.h).
   */
  frees = r == 0 && t->nundurable > 0;
  if (frees)
    parity = thin_read_epoch_turn_locked (t);
  thin_lock_release (t);
  if (r == -1) {
    thin_commit_lock_release (t);
    return -1;
  }
  r = client_flush ? engine_flush (t->e) : engine_flush_data (t->e);
  if (r == 0 && len > 0 &&
      (pwrite_all (t->fd, records, len, t->journal_end) == -1 ||
       fdatasync (t->fd) == -1)) {
    dc_error ("meta=%s: cannot write the journal: %m", t->path);
    r = -1;
  }
  if (r == 0) {
    bool full;

    t->journal_end += len;
    if (frees)
      thin_reads_wait (t, parity);
    thin_lock_acquire (t);
    t->takenlen = 0;
    t->durable_seq = upto;
    release_undurable_locked (t, upto);
    t->commits++;
    t->meta_bytes = t->journal_end;
    full = thin_journal_full_locked (t);
    limit = thin_reserve_limit_locked (t);
    over = thin_space_reserve_slots (&t->space) > limit;
    pthread_cond_broadcast (&t->changed);
    thin_lock_release (t);
    if (full)
      checkpoint (t);
  }
  thin_commit_lock_release (t);
  /* The runs this commit kept, past the reserve: discarded, the largest
   * first (their records go with the next commit).
   */
  if (over && thin_reserve_trim (t, limit) == -1)
    r = -1;
  return r;
}

int
thin_commit (struct thin *t, bool client_flush)
{
  thin_commit_lock_acquire (t);
  return commit_and_release_lock (t, client_flush);
}

int
thin_commit_unless_busy (struct thin *t)
{
  if (!thin_commit_lock_try (t))
    return 0;
  return commit_and_release_lock (t, false);
}

/* Opening. */

static int
create_meta (struct thin *t)
  NO_THREAD_SAFETY_ANALYSIS
{
  void *image;
  size_t len;
  int fd;

  if (t->read_only) {
    dc_error ("meta=%s: does not exist, and the backend is read-only",
              t->path);
    errno = ENOENT;
    return -1;
  }
  if (thin_checkpoint_encode (&t->id, t->map.runs, NULL, 1,
                              (uint64_t) time (NULL), &image, &len) == -1)
    return -1;
  fd = write_meta_file (t, image, len);
  free (image);
  if (fd == -1)
    return -1;
  t->fd = fd;
  t->journal_end = len;
  t->next_seq = 1;
  dc_debug ("meta=%s: created for %" PRIu64 " logical slots of %" PRIu64
            " bytes over %" PRIu64 " physical", t->path, t->map.nlogical,
            t->slot, t->map.nphys);
  return 0;
}

static int
read_whole (int fd, const char *path, unsigned char **image, size_t *len)
{
  struct stat st;
  ssize_t r;

  if (fstat (fd, &st) == -1 || (uint64_t) st.st_size > META_MAX) {
    dc_error ("meta=%s: cannot read it, or larger than 4G", path);
    return -1;
  }
  *len = st.st_size;
  *image = malloc (*len + 1);
  if (*image == NULL) {
    dc_error ("meta=%s: out of memory", path);
    return -1;
  }
  for (size_t got = 0; got < *len; got += r) {
    r = pread (fd, *image + got, *len - got, got);
    if (r <= 0) {
      dc_error ("meta=%s: read error: %m", path);
      free (*image);
      return -1;
    }
  }
  return 0;
}

/* An older file becomes a checkpoint of this version at once: its
 * records are replayed, so nothing of it is needed afterwards, and no
 * record of this version is appended to it.
 */
static int
convert_old (struct thin *t, uint32_t version)
  NO_THREAD_SAFETY_ANALYSIS
{
  dc_debug ("meta=%s: format version %" PRIu32 ", converting to version %d",
            t->path, version, THIN_VERSION);
  if (t->read_only)
    return 0;
  thin_commit_lock_acquire (t);
  t->durable_seq = t->next_seq - 1;
  if (checkpoint (t) == -1) {
    thin_commit_lock_release (t);
    dc_error ("meta=%s: cannot convert it from format version %" PRIu32,
              t->path, version);
    return -1;
  }
  thin_commit_lock_release (t);
  return 0;
}

/* Recover from an existing meta file, cutting off a torn tail.  *unmapped
 * gets the physical slots no run maps, *reserve the part of them in the
 * reserve.
 */
static int
load_meta (struct thin *t, int fd, struct extmap **unmapped,
           struct extmap **reserve)
  NO_THREAD_SAFETY_ANALYSIS
{
  CLEANUP_FREE unsigned char *image = NULL;
  struct thin_recovery rec;
  char why[256];
  size_t len;

  if (flock (fd, t->read_only ? LOCK_SH | LOCK_NB : LOCK_EX | LOCK_NB) == -1) {
    dc_error ("meta=%s: in use by another server (%m)", t->path);
    return -1;
  }
  if (read_whole (fd, t->path, &image, &len) == -1)
    return -1;
  if (thin_meta_recover (image, len, &t->id, &t->map, &rec, why,
                         sizeof why) == -1) {
    dc_error ("meta=%s: %s: refusing to start (it is left as it is; a new "
              "meta file would forget every mapping)", t->path, why);
    errno = EINVAL;
    return -1;
  }
  *unmapped = rec.free;
  *reserve = rec.reserve;
  t->fd = fd;
  t->next_seq = rec.next_seq;
  t->last_checkpoint = rec.checkpoint_time;
  if (rec.version != THIN_VERSION)
    return convert_old (t, rec.version);
  if (rec.valid_len < len) {
    dc_debug ("meta=%s: cut a torn journal tail of %zu bytes",
              t->path, len - rec.valid_len);
    if (!t->read_only && (ftruncate (fd, rec.valid_len) == -1 ||
                          fdatasync (fd) == -1)) {
      dc_error ("meta=%s: cannot cut the torn tail: %m", t->path);
      return -1;
    }
  }
  t->journal_end = rec.valid_len;
  dc_debug ("meta=%s: %" PRIu64 " slots mapped in %" PRIu64 " runs after "
            "replaying %" PRIu64 " journal records", t->path, t->map.mapped,
            thin_map_runs (&t->map), rec.records);
  return 0;
}

/* The free space, sorted out once at start. */

struct learn {
  struct thin *t;
  struct extmap *zeros;
};

/* A range the backend reads as zeros: its whole slots. */
static int
learn_extent (uint64_t offset, uint64_t length, uint32_t type, void *opaque)
{
  struct learn *ln = opaque;
  uint64_t from = round_up (offset, ln->t->slot) >> ln->t->shift;
  uint64_t to = round_down (offset + length, ln->t->slot) >> ln->t->shift;

  if ((type & BACKEND_EXTENT_ZERO) && to > from)
    extmap_insert (ln->zeros, from, to - from, 0);
  return 0;
}

/* Which slots read as zeros: the backend's own answer, asked once here
 * (a sparse file's holes, an NBD server's zero extents).  Asked afresh
 * at every start, never stored: a slot written but not yet committed
 * when the server was killed reads as data now, and is not taken for
 * zero.  NULL (nothing known) when the backend cannot say.
 */
static struct extmap *
backend_zeros (struct thin *t)
  NO_THREAD_SAFETY_ANALYSIS
{
  struct learn ln = { .t = t, .zeros = extmap_new () };
  uint64_t size = t->map.nphys << t->shift;

  if (ln.zeros == NULL || !engine_limits (t->e)->can_extents ||
      engine_extents (t->e, 0, size, learn_extent, &ln) == -1) {
    dc_debug ("meta=%s: the backend does not say which slots read as "
              "zeros: a new slot is zeroed around its first write", t->path);
    extmap_free (ln.zeros);
    return NULL;
  }
  return ln.zeros;
}

static int
learn_zero_run (const struct extent *x, void *opaque)
{
  thin_space_learn_zero (opaque, x->offset, x->length);
  return 0;
}

struct sort_free {
  struct thin *t;
};

static int
sort_free_run (const struct extent *x, void *opaque)
  NO_THREAD_SAFETY_ANALYSIS
{
  struct thin *t = ((struct sort_free *) opaque)->t;

  if (engine_discard_pending (t->e, x->offset << t->shift,
                              x->length << t->shift))
    thin_space_add_pending (&t->space, x->offset, x->length);
  else
    thin_space_add_clean (&t->space, x->offset, x->length, false);
  return 0;
}

/* Free slots are clean, except those the engine still has a discard for
 * (loaded from state=), and the clean ones are zero where the backend
 * says so.  On a backend that reads zeros everywhere and has nothing
 * pending, the free set becomes the zero map as it is (owned from now
 * on: *unmapped is set to NULL).
 */
static void
sort_free (struct thin *t, struct extmap **unmapped)
  NO_THREAD_SAFETY_ANALYSIS
{
  struct extmap *zeros = backend_zeros (t);
  struct sort_free sf = { .t = t };
  struct extent x;
  bool all_zero;
  uint32_t now;

  all_zero = zeros && extmap_count (zeros) == 1 &&
             extmap_bytes (zeros) == t->map.nphys;
  if (engine_dump_batch (t->e, 0, &x, 1, &now) > 0)
    extmap_iterate (*unmapped, 0, sort_free_run, &sf);
  else {
    thin_space_adopt (&t->space, *unmapped, all_zero);
    *unmapped = NULL;
  }
  if (zeros && !all_zero)
    extmap_iterate (zeros, 0, learn_zero_run, &t->space);
  extmap_free (zeros);
}

/* The reserve's runs that are clean now join the reserve again (free
 * slots the engine has a discard for stay pending: it goes out anyway;
 * those the backend reads as zeros stay zero: nothing is left there to
 * discard).
 */
static int
keep_reserve_run (const struct extent *x, void *opaque)
  NO_THREAD_SAFETY_ANALYSIS
{
  struct thin *t = opaque;
  uint64_t p = x->offset, end = x->offset + x->length;

  while (p < end) {
    struct extent run;
    enum thin_free_kind kind = thin_space_find (&t->space, p, &run);
    uint64_t to = kind == THIN_NOT_FREE ? p + 1
                  : MIN (end, run.offset + run.length);

    if (kind == THIN_CLEAN &&
        thin_space_take_from (&t->space, kind, &run, p, to - p) == 0)
      thin_space_add_reserve (&t->space, p, to - p);
    p = to;
  }
  return 0;
}

int
thin_meta_open (struct thin *t)
{
  struct extmap *unmapped = NULL, *reserve = NULL;
  int fd = open (t->path, (t->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  int r;

  if (fd == -1 && errno == ENOENT) {
    r = create_meta (t);
    if (r == 0 && (unmapped = thin_map_free_set (&t->map)) == NULL) {
      dc_error ("thin: out of memory for the free space");
      r = -1;
    }
  }
  else if (fd == -1) {
    dc_error ("meta=%s: %m", t->path);
    return -1;
  }
  else if ((r = load_meta (t, fd, &unmapped, &reserve)) == -1 && t->fd != fd)
    close (fd);
  if (r == 0) {
    sort_free (t, &unmapped);
    if (reserve)
      extmap_iterate (reserve, 0, keep_reserve_run, t);
    t->durable_seq = t->next_seq - 1;
    t->meta_bytes = t->journal_end;
  }
  extmap_free (unmapped);
  extmap_free (reserve);
  /* A reserve larger than reserve= now (or reserve=0): the rest goes. */
  if (r == 0 && !t->read_only &&
      thin_space_reserve_slots (&t->space) > t->reserve_limit)
    thin_reserve_trim (t, t->reserve_limit);
  return r;
}

void
thin_meta_close (struct thin *t)
{
  if (t->read_only || thin_commit (t, false) == -1)
    return;
  thin_commit_lock_acquire (t);
  checkpoint (t);
  thin_commit_lock_release (t);
}

bool
thin_journal_full_locked (struct thin *t)
{
  uint64_t grown = MIN (thin_map_runs (&t->map) * t->journal_per_run,
                        JOURNAL_MAX);

  return t->journal_end > MAX (t->journal_limit, grown);
}

/* The unmaps of a batch have their discard in the engine: the runs can
 * be freed by the commit that makes their records durable.
 */
void
thin_mark_recorded_locked (struct thin *t, uint64_t first_seq, uint64_t last_seq)
  REQUIRES (thin_lock)
{
  size_t lo = 0, hi = t->nundurable;

  while (lo < hi) {                 /* the first entry >= first_seq */
    size_t mid = lo + (hi - lo) / 2;

    if (t->undurable[mid].seq < first_seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < t->nundurable && t->undurable[lo].seq <= last_seq; lo++)
    t->undurable[lo].recorded = true;
  pthread_cond_broadcast (&t->changed);
}
