/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume (see thin-volume.h).
 *
 * Each request is cut at slot boundaries; each piece goes to the engine
 * (engine.h's data path) at its physical address, so that
 * pending-discard cancellation, alignment, batching and the rate limit
 * all apply as in identity mode.  The thin lock guards the map and the
 * record buffer and is never held across I/O; the lock order is thin,
 * then engine.
 *
 * A request doing I/O on a physical slot pins it; an unmap waits for
 * the pins to go, so a slot's data never reaches another logical slot.
 * A new slot is zero-filled around the first write before its map
 * record is appended; a commit (FLUSH, FUA, a full record buffer, or a
 * write that needs a slot only a commit can free) takes the records,
 * flushes the backend, then appends and fsyncs them: so a durable
 * mapping always points at flushed data.
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
#include "engine.h"
#include "fileio.h"
#include "grow.h"
#include "log.h"
#include "thin-volume.h"
#include "thin.h"
#include "volume-internal.h"

/* A checkpoint replaces the journal when it grows past this. */
#define JOURNAL_LIMIT (4 * 1024 * 1024)
/* Records buffered before a commit is forced (memory bound). */
#define BUFFER_LIMIT (256 * 1024)
/* The largest meta file we load. */
#define META_MAX (UINT64_C (1) << 32)

struct thin {
  struct volume v;                  /* first: thin_of casts back */
  struct engine *e;                 /* v.engine */
  struct thin_meta_id id;
  uint64_t slot;
  unsigned shift;
  char *path;                       /* meta= */
  bool read_only;

  pthread_mutex_t commit_lock;      /* one commit or checkpoint at a time; */
  int fd;                           /* the meta file, written under it */
  uint64_t journal_end;             /* its length */
  uint64_t journal_limit;

  pthread_mutex_t lock;             /* guards everything below */
  pthread_cond_t changed;           /* a slot was set up, unpinned, freed */
  struct thin_map map;
  unsigned char *buf;               /* encoded records not on disk yet */
  size_t buflen, bufcap;
  uint64_t next_seq;                /* the next record's number */
  uint64_t durable_seq;             /* records up to this are on disk */
  uint64_t trims, trim_bytes;       /* as the client sent them */
  uint64_t allocated, reused, enospc, commits, checkpoints;
  uint64_t last_checkpoint;
  uint64_t meta_bytes;              /* journal_end, for stats */
};

static struct thin *
thin_of (struct volume *v)
{
  return (struct thin *) v;
}

static uint64_t
phys_offset (const struct thin *t, uint32_t p)
{
  return (uint64_t) p << t->shift;
}

/* Records. */

/* Room for one more record; the unmap path reserves before changing
 * anything, so it never fails half-way.
 */
static int
reserve_record_locked (struct thin *t)
{
  if (t->buflen + THIN_RECORD_SIZE > t->bufcap) {
    void *p = grow_array (t->buf, &t->bufcap, 1, 64 * THIN_RECORD_SIZE);

    if (p == NULL) {
      dc_error ("thin: out of memory for the journal");
      return -1;
    }
    t->buf = p;
  }
  return 0;
}

static uint64_t
append_record_locked (struct thin *t, uint32_t type, uint64_t l, uint32_t p)
{
  struct thin_record r = {
    .type = type, .phys = p, .seq = t->next_seq++, .logical = (uint32_t) l,
  };

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
write_meta_file (struct thin *t, const void *image, size_t len)
{
  CLEANUP_FREE char *tmp = NULL;
  int fd;

  if (asprintf (&tmp, "%s.tmp", t->path) == -1) {
    dc_error ("meta=%s: out of memory", t->path);
    return -1;
  }
  fd = open (tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd == -1) {
    dc_error ("meta=%s: cannot create %s: %m", t->path, tmp);
    return -1;
  }
  if (flock (fd, LOCK_EX | LOCK_NB) == -1 ||
      pwrite_all (fd, image, len, 0) == -1 || fdatasync (fd) == -1 ||
      rename (tmp, t->path) == -1 || fsync_dir (t->path) == -1) {
    dc_error ("meta=%s: cannot write a checkpoint: %m", t->path);
    close (fd);
    unlink (tmp);
    return -1;
  }
  return fd;
}

/* The durable map: the current one without slots still being set up
 * and with the buffered (not yet durable) records undone, newest first.
 * Lock held; the caller holds commit_lock, so nothing is being written.
 */
static uint32_t *
durable_map_locked (struct thin *t)
{
  uint32_t *l2p = malloc (t->map.nlogical * sizeof *l2p + 1);

  if (l2p == NULL)
    return NULL;
  memcpy (l2p, t->map.l2p, t->map.nlogical * sizeof *l2p);
  for (uint64_t l = 0; l < t->map.nlogical; l++)
    if (l2p[l] != THIN_UNMAPPED && t->map.pstate[l2p[l]] == THIN_INIT)
      l2p[l] = THIN_UNMAPPED;
  for (size_t off = t->buflen; off > 0; off -= THIN_RECORD_SIZE) {
    struct thin_record r;

    thin_record_decode (t->buf + off - THIN_RECORD_SIZE, &r);
    l2p[r.logical] = r.type == THIN_REC_MAP ? THIN_UNMAPPED : r.phys;
  }
  return l2p;
}

/* Replace the journal by a checkpoint of the durable map.  commit_lock
 * held.  A failure is reported and the journal simply goes on.
 */
static int
checkpoint (struct thin *t)
{
  uint64_t next_seq, now = (uint64_t) time (NULL);
  uint32_t high_water, *l2p;
  void *image;
  size_t len;
  int fd, r;

  pthread_mutex_lock (&t->lock);
  l2p = durable_map_locked (t);
  next_seq = t->durable_seq + 1;
  high_water = t->map.next_clean;
  pthread_mutex_unlock (&t->lock);
  if (l2p == NULL) {
    dc_error ("meta=%s: out of memory for a checkpoint", t->path);
    return -1;
  }
  r = thin_checkpoint_encode (&t->id, l2p, t->map.nlogical, next_seq,
                              high_water, now, &image, &len);
  free (l2p);
  if (r == -1)
    return -1;
  fd = write_meta_file (t, image, len);
  free (image);
  if (fd == -1)
    return -1;
  close (t->fd);
  t->fd = fd;
  t->journal_end = len;
  pthread_mutex_lock (&t->lock);
  t->checkpoints++;
  t->last_checkpoint = now;
  t->meta_bytes = len;
  pthread_mutex_unlock (&t->lock);
  return 0;
}

/* Make every record appended so far durable, after the data they point
 * at: take them, flush the backend, append and fsync them, and only then
 * let the slots they unmapped be reused.  client_flush: for a client's
 * FLUSH, which flush-discards=true also makes forward what is pending;
 * the other commits (FUA, a full buffer, a slot needed, the clean stop,
 * whose pending discards state= may keep) only flush data.
 */
static int
commit (struct thin *t, bool client_flush)
{
  CLEANUP_FREE unsigned char *records = NULL;
  size_t len;
  uint64_t upto;
  int r;

  pthread_mutex_lock (&t->commit_lock);
  pthread_mutex_lock (&t->lock);
  len = t->buflen;
  upto = t->next_seq - 1;
  if (len > 0 && (records = malloc (len)) != NULL)
    memcpy (records, t->buf, len);
  pthread_mutex_unlock (&t->lock);
  if (len > 0 && records == NULL) {
    pthread_mutex_unlock (&t->commit_lock);
    dc_error ("thin: out of memory committing the journal");
    errno = ENOMEM;
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
    t->journal_end += len;
    pthread_mutex_lock (&t->lock);
    if (len > 0) {
      memmove (t->buf, t->buf + len, t->buflen - len);
      t->buflen -= len;
    }
    t->durable_seq = upto;
    thin_map_commit (&t->map, upto);
    t->commits++;
    t->meta_bytes = t->journal_end;
    pthread_cond_broadcast (&t->changed);
    pthread_mutex_unlock (&t->lock);
    if (t->journal_end > t->journal_limit)
      checkpoint (t);
  }
  pthread_mutex_unlock (&t->commit_lock);
  return r;
}

/* Pins. */

/* Wait while logical slot l is being set up; pin and return its
 * physical slot, or THIN_UNMAPPED.
 */
static uint32_t
pin_locked (struct thin *t, uint64_t l)
{
  for (;;) {
    uint32_t p = t->map.l2p[l];

    if (p == THIN_UNMAPPED)
      return p;
    if (t->map.pstate[p] == THIN_MAPPED) {
      t->map.pins[p]++;
      return p;
    }
    pthread_cond_wait (&t->changed, &t->lock);
  }
}

static void
unpin (struct thin *t, uint32_t p)
{
  pthread_mutex_lock (&t->lock);
  if (--t->map.pins[p] == 0)
    pthread_cond_broadcast (&t->changed);
  pthread_mutex_unlock (&t->lock);
}

/* The requests, slot by slot. */

struct piece {
  uint64_t l;                       /* logical slot */
  uint64_t start;                   /* offset in the slot */
  uint64_t n;                       /* bytes */
  uint64_t done;                    /* offset in the request */
};

typedef int (*piece_fn) (struct thin *t, const struct piece *pc, void *arg);

static int
for_each_piece (struct thin *t, uint64_t offset, uint64_t length,
                piece_fn fn, void *arg)
{
  struct piece pc = { 0 };

  for (pc.done = 0; pc.done < length; pc.done += pc.n) {
    uint64_t pos = offset + pc.done;

    pc.l = pos >> t->shift;
    pc.start = pos & (t->slot - 1);
    pc.n = MIN (t->slot - pc.start, length - pc.done);
    if (fn (t, &pc, arg) == -1)
      return -1;
  }
  return 0;
}

/* Runs: consecutive logical slots mapped to consecutive physical ones
 * go to the backend as one request (a sequential read or rewrite is
 * then as large through thin mode as without it).
 */

/* The run starting at byte pos (before end): pin and return its first
 * physical slot, or THIN_UNMAPPED for a run of unmapped slots; *len is
 * its length in bytes.  Waits while the first slot is being set up.
 */
static uint32_t
pin_run_locked (struct thin *t, uint64_t pos, uint64_t end, uint64_t *len)
{
  uint64_t l = pos >> t->shift, next = round_down (pos, t->slot) + t->slot;
  uint32_t p = pin_locked (t, l);

  for (uint32_t q = p; next < end; next += t->slot) {
    uint32_t n = t->map.l2p[++l];

    if (p == THIN_UNMAPPED ? n != THIN_UNMAPPED
        : n != q + 1 || t->map.pstate[n] != THIN_MAPPED)
      break;
    if (p != THIN_UNMAPPED)
      t->map.pins[++q]++;
  }
  *len = MIN (next, end) - pos;
  return p;
}

static void
unpin_run (struct thin *t, uint32_t p, uint64_t pos, uint64_t len)
{
  uint64_t slots = ((pos & (t->slot - 1)) + len + t->slot - 1) >> t->shift;

  pthread_mutex_lock (&t->lock);
  for (uint64_t i = 0; i < slots; i++)
    if (--t->map.pins[p + i] == 0)
      pthread_cond_broadcast (&t->changed);
  pthread_mutex_unlock (&t->lock);
}

static int
thin_pread (struct volume *v, void *buf, uint32_t count, uint64_t offset)
{
  struct thin *t = thin_of (v);
  uint64_t end = offset + count, len;

  if (volume_check_range (v, offset, count, false) == -1)
    return -1;
  for (uint64_t pos = offset; pos < end; pos += len) {
    char *dst = (char *) buf + (pos - offset);
    uint32_t p;
    int r;

    pthread_mutex_lock (&t->lock);
    p = pin_run_locked (t, pos, end, &len);
    pthread_mutex_unlock (&t->lock);
    if (p == THIN_UNMAPPED) {
      memset (dst, 0, len);
      continue;
    }
    r = engine_pread (t->e, dst, len,
                           phys_offset (t, p) + (pos & (t->slot - 1)));
    unpin_run (t, p, pos, len);
    if (r == -1)
      return -1;
  }
  return 0;
}

/* Whether the engine still holds a discard over physical slot p. */
static bool
discard_pending (struct thin *t, uint32_t p)
{
  return engine_discard_pending (t->e, phys_offset (t, p), t->slot);
}

/* Allocate a slot for unmapped logical slot l.  When the pool is empty
 * but unmaps wait for a commit, commit and try again.  Returns the slot
 * (INIT), THIN_UNMAPPED with errno ENOSPC (or the commit's error), or
 * THIN_UNMAPPED with errno EAGAIN when l got mapped meanwhile.
 */
static uint32_t
alloc_locked (struct thin *t, uint64_t l, bool *reused)
{
  for (;;) {
    uint32_t p;
    int r;

    if (t->map.l2p[l] != THIN_UNMAPPED) {
      errno = EAGAIN;
      return THIN_UNMAPPED;
    }
    p = thin_map_alloc (&t->map, l, reused);
    if (p != THIN_UNMAPPED)
      return p;
    if (thin_map_pending_free (&t->map) == 0) {
      if (t->enospc++ == 0)
        dc_error ("thin: no free slot left in the pool of %" PRIu32 " (%"
                  PRIu64 " bytes): writes to unmapped slots fail with "
                  "ENOSPC until something is trimmed (counted as thin_enospc)",
                  t->map.nphys, (uint64_t) t->map.nphys << t->shift);
      errno = ENOSPC;
      return THIN_UNMAPPED;
    }
    pthread_mutex_unlock (&t->lock);
    r = commit (t, false);
    pthread_mutex_lock (&t->lock);
    if (r == -1)
      return THIN_UNMAPPED;
    if (t->map.nfreed == 0 && thin_map_pending_free (&t->map) > 0) {
      /* Freed slots whose discard is still being recorded: wait. */
      struct timespec ts;

      clock_gettime (CLOCK_MONOTONIC, &ts);
      ts.tv_nsec += 10000000;
      if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait (&t->changed, &t->lock, &ts);
    }
  }
}

/* The first write to a new slot: zeros around the data, so the slot's
 * previous content never shows.  One backend zero (or write of zeros)
 * per uncovered part; all of it is flushed before the map record is.
 */
static int
init_slot (struct thin *t, uint32_t p, const char *data,
           const struct piece *pc)
{
  uint64_t base = phys_offset (t, p), end = pc->start + pc->n;
  int r = 0;

  if (pc->start > 0)
    r = engine_zero (t->e, base, pc->start, false, false, false);
  if (r == 0)
    r = engine_pwrite (t->e, data, pc->n, base + pc->start, false);
  if (r == 0 && end < t->slot)
    r = engine_zero (t->e, base + end, t->slot - end, false, false,
                          false);
  return r;
}

struct write_args {
  const char *buf;
  bool fua;
  bool allocated;
};

static int
write_new_slot (struct thin *t, const struct piece *pc,
                struct write_args *a, uint32_t p, bool reused)
{
  bool cancels = reused && discard_pending (t, p);
  int r = init_slot (t, p, a->buf + pc->done, pc);

  pthread_mutex_lock (&t->lock);
  if (r == 0)
    r = reserve_record_locked (t);
  if (r == -1)
    thin_map_abort (&t->map, p);
  else {
    append_record_locked (t, THIN_REC_MAP, pc->l, p);
    thin_map_mapped (&t->map, p);
    t->allocated++;
    t->reused += cancels;
    a->allocated = true;
  }
  pthread_cond_broadcast (&t->changed);
  pthread_mutex_unlock (&t->lock);
  return r;
}

static int
write_piece (struct thin *t, const struct piece *pc, void *arg)
{
  struct write_args *a = arg;
  bool reused;
  uint32_t p;
  int r;

  pthread_mutex_lock (&t->lock);
  for (;;) {
    p = pin_locked (t, pc->l);
    if (p != THIN_UNMAPPED) {
      pthread_mutex_unlock (&t->lock);
      r = engine_pwrite (t->e, a->buf + pc->done, pc->n,
                              phys_offset (t, p) + pc->start, a->fua);
      unpin (t, p);
      return r;
    }
    p = alloc_locked (t, pc->l, &reused);
    if (p != THIN_UNMAPPED)
      break;
    if (errno != EAGAIN) {
      pthread_mutex_unlock (&t->lock);
      return -1;
    }
  }
  pthread_mutex_unlock (&t->lock);
  return write_new_slot (t, pc, a, p, reused);
}

/* Commit when records wait and the request needs durability (FUA), or
 * when the buffer has grown past its bound.
 */
static int
commit_if_needed (struct thin *t, bool fua)
{
  bool needed;

  pthread_mutex_lock (&t->lock);
  needed = (fua && t->durable_seq + 1 < t->next_seq) ||
           t->buflen >= BUFFER_LIMIT;
  pthread_mutex_unlock (&t->lock);
  return needed ? commit (t, false) : 0;
}

/* A run of mapped slots in one backend write; an unmapped slot alone
 * through write_piece, which allocates it.
 */
static int
write_run (struct thin *t, uint64_t offset, uint64_t pos, uint64_t end,
           struct write_args *a, uint64_t *len)
{
  struct piece pc;
  uint32_t p;
  int r;

  pthread_mutex_lock (&t->lock);
  p = pin_run_locked (t, pos, end, len);
  pthread_mutex_unlock (&t->lock);
  if (p != THIN_UNMAPPED) {
    r = engine_pwrite (t->e, a->buf + (pos - offset), *len,
                            phys_offset (t, p) + (pos & (t->slot - 1)),
                            a->fua);
    unpin_run (t, p, pos, *len);
    return r;
  }
  pc.l = pos >> t->shift;
  pc.start = pos & (t->slot - 1);
  pc.n = *len = MIN (t->slot - pc.start, end - pos);
  pc.done = pos - offset;
  return write_piece (t, &pc, a);
}

static int
thin_pwrite (struct volume *v, const void *buf, uint32_t count,
             uint64_t offset, bool fua)
{
  struct thin *t = thin_of (v);
  struct write_args a = { .buf = buf, .fua = fua };
  uint64_t end = offset + count, len;
  int r = 0;

  if (volume_check_range (v, offset, count, true) == -1)
    return -1;
  for (uint64_t pos = offset; r == 0 && pos < end; pos += len)
    r = write_run (t, offset, pos, end, &a, &len);
  if (r == 0 || a.allocated)
    r = commit_if_needed (t, fua) == -1 ? -1 : r;
  return r;
}

/* Unmap a whole logical slot: wait until nobody does I/O on it, journal
 * the unmap, and hand its physical slot to the engine as a discard.  The
 * slot becomes reusable at the commit after the discard is recorded.
 */
static int
unmap_piece (struct thin *t, const struct piece *pc, bool fua)
{
  uint32_t p;
  int r;

  pthread_mutex_lock (&t->lock);
  for (;;) {
    p = t->map.l2p[pc->l];
    if (p == THIN_UNMAPPED) {
      pthread_mutex_unlock (&t->lock);
      return 0;
    }
    if (t->map.pstate[p] == THIN_MAPPED && t->map.pins[p] == 0)
      break;
    pthread_cond_wait (&t->changed, &t->lock);
  }
  if (reserve_record_locked (t) == -1 ||
      thin_map_reserve_unmap (&t->map) == -1) {
    pthread_mutex_unlock (&t->lock);
    return -1;
  }
  thin_map_unmap (&t->map, pc->l,
                  append_record_locked (t, THIN_REC_UNMAP, pc->l, p));
  pthread_mutex_unlock (&t->lock);

  r = engine_trim (t->e, phys_offset (t, p), t->slot, fua);

  pthread_mutex_lock (&t->lock);
  thin_map_unmapped (&t->map, p);
  pthread_cond_broadcast (&t->changed);
  pthread_mutex_unlock (&t->lock);
  return r;
}

struct clear_args {
  bool zero;                        /* zero, else trim */
  bool may_trim, fua, fast;
};

/* A whole slot is unmapped; part of a mapped one goes to the engine as
 * a trim or a zero at the physical address; part of an unmapped one
 * already reads as zeros.
 */
static int
clear_piece (struct thin *t, const struct piece *pc, void *arg)
{
  const struct clear_args *a = arg;
  uint64_t off;
  uint32_t p;
  int r;

  /* The last slot of a disk whose size is not a multiple of the slot
   * is whole when it is covered to the end of the disk.
   */
  if (pc->start == 0 &&
      (pc->n == t->slot || (pc->l << t->shift) + pc->n == t->v.size))
    return unmap_piece (t, pc, a->fua);
  pthread_mutex_lock (&t->lock);
  p = pin_locked (t, pc->l);
  pthread_mutex_unlock (&t->lock);
  if (p == THIN_UNMAPPED)
    return 0;
  off = phys_offset (t, p) + pc->start;
  r = a->zero ? engine_zero (t->e, off, pc->n, a->may_trim, a->fua,
                                  a->fast)
              : engine_trim (t->e, off, pc->n, a->fua);
  unpin (t, p);
  return r;
}

static int
clear (struct thin *t, uint64_t offset, uint64_t length,
       const struct clear_args *a)
{
  int r;

  if (volume_check_range (&t->v, offset, length, true) == -1)
    return -1;
  r = for_each_piece (t, offset, length, clear_piece, (void *) a);
  if (r == 0)
    r = commit_if_needed (t, a->fua);
  return r;
}

static int
thin_zero (struct volume *v, uint64_t offset, uint64_t length, bool may_trim,
           bool fua, bool fast)
{
  struct thin *t = thin_of (v);
  struct clear_args a = {
    .zero = true, .may_trim = may_trim, .fua = fua, .fast = fast,
  };

  /* A fast zero must change nothing when it fails: refuse before
   * unmapping anything if a partial slot would need slow zeroing.
   */
  if (fast && !engine_limits (t->e)->can_zero &&
      (!is_aligned (offset, t->slot) || !is_aligned (length, t->slot))) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return clear (t, offset, length, &a);
}

static int
thin_trim (struct volume *v, uint64_t offset, uint64_t length, bool fua)
{
  struct thin *t = thin_of (v);
  struct clear_args a = { .zero = false, .fua = fua };

  pthread_mutex_lock (&t->lock);
  t->trims++;
  t->trim_bytes += length;
  pthread_mutex_unlock (&t->lock);
  return clear (t, offset, length, &a);
}

static int
thin_flush (struct volume *v)
{
  return commit (thin_of (v), true);
}

/* Extents: unmapped slots are holes that read as zeros, mapped ones
 * data; runs of either are reported as one.
 */
static int
thin_extents (struct volume *v, uint64_t offset, uint64_t length,
              backend_extent_fn fn, void *opaque)
{
  struct thin *t = thin_of (v);
  uint64_t end, pos = offset;

  if (volume_check_range (v, offset, length, false) == -1)
    return -1;
  end = offset + length;
  while (pos < end) {
    uint64_t run = pos;
    uint32_t type = 0;

    pthread_mutex_lock (&t->lock);
    for (bool first = true; run < end; first = false) {
      uint64_t l = run >> t->shift;
      uint32_t ty = t->map.l2p[l] == THIN_UNMAPPED
                    ? BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO : 0;

      if (!first && ty != type)
        break;
      type = ty;
      run = MIN (round_down (run, t->slot) + t->slot, end);
    }
    pthread_mutex_unlock (&t->lock);
    if (fn (pos, run - pos, type, opaque) == -1)
      return -1;
    pos = run;
  }
  return 0;
}

void
thin_set_journal_limit (struct volume *v, uint64_t bytes)
{
  struct thin *t = thin_of (v);

  pthread_mutex_lock (&t->commit_lock);
  t->journal_limit = bytes;
  pthread_mutex_unlock (&t->commit_lock);
}

/* Statistics. */

static void
thin_stats (struct volume *v, struct volume_stats *vst)
{
  struct thin *t = thin_of (v);
  struct thin_stats *st = &vst->th;
  uint64_t pending = 0;

  pthread_mutex_lock (&t->lock);
  for (uint32_t i = 0; i < t->map.nfreed; i++)
    pending += discard_pending (t, t->map.freed[i]);
  vst->thin = true;
  st->slot = t->slot;
  st->size = t->v.size;
  st->slots = t->map.nphys;
  st->trims = t->trims;
  st->trim_bytes = t->trim_bytes;
  st->mapped = t->map.mapped;
  st->free_undurable = t->map.nundurable;
  st->free_pending = pending;
  st->free_clean = t->map.nphys - t->map.mapped - t->map.nundurable -
                   pending;
  st->allocated = t->allocated;
  st->reused = t->reused;
  st->enospc = t->enospc;
  st->commits = t->commits;
  st->journal_bytes = t->meta_bytes;
  st->checkpoints = t->checkpoints;
  st->last_checkpoint = t->last_checkpoint;
  pthread_mutex_unlock (&t->lock);
}

static ssize_t
thin_dump_map_batch (struct volume *v, uint64_t from, uint64_t *logical,
                     uint64_t *physical, size_t max)
{
  struct thin *t = thin_of (v);
  size_t n = 0;

  pthread_mutex_lock (&t->lock);
  for (uint64_t l = from; l < t->map.nlogical && n < max; l++) {
    uint32_t p = t->map.l2p[l];

    if (p != THIN_UNMAPPED && t->map.pstate[p] == THIN_MAPPED) {
      logical[n] = l;
      physical[n] = p;
      n++;
    }
  }
  pthread_mutex_unlock (&t->lock);
  return n;
}

/* Opening. */

/* The slot against the backend, and the pool's and the disk's sizes. */
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
  if (bsize / t->slot == 0 || bsize / t->slot >= THIN_UNMAPPED) {
    dc_error ("slot=%" PRIu64 ": the backend's %" PRIu64 " bytes must hold "
              "from 1 to %" PRIu32 " slots", t->slot, bsize, THIN_UNMAPPED - 1);
    return -1;
  }
  if (t->id.size / t->slot >= THIN_UNMAPPED) {
    dc_error ("size=%" PRIu64 ": more than %" PRIu32 " slots of %" PRIu64
              " bytes: use a larger slot=", t->id.size, THIN_UNMAPPED - 1,
              t->slot);
    return -1;
  }
  return 0;
}

static int
create_meta (struct thin *t)
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
  if (thin_checkpoint_encode (&t->id, t->map.l2p, t->map.nlogical, 1, 0,
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
            " bytes over %" PRIu32 " physical", t->path, t->map.nlogical,
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

/* Recover from an existing meta file, cutting off a torn tail. */
static int
load_meta (struct thin *t, int fd)
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
  if (rec.valid_len < len) {
    dc_debug ("meta=%s: cut a torn journal tail of %zu bytes",
              t->path, len - rec.valid_len);
    if (!t->read_only && (ftruncate (fd, rec.valid_len) == -1 ||
                          fdatasync (fd) == -1)) {
      dc_error ("meta=%s: cannot cut the torn tail: %m", t->path);
      return -1;
    }
  }
  t->fd = fd;
  t->journal_end = rec.valid_len;
  t->next_seq = rec.next_seq;
  t->last_checkpoint = rec.checkpoint_time;
  dc_debug ("meta=%s: %" PRIu64 " slots mapped after replaying %" PRIu64
            " journal records", t->path, t->map.mapped, rec.records);
  return 0;
}

static int
open_meta (struct thin *t)
{
  int fd = open (t->path, (t->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);

  if (fd == -1 && errno == ENOENT)
    return create_meta (t);
  if (fd == -1) {
    dc_error ("meta=%s: %m", t->path);
    return -1;
  }
  if (load_meta (t, fd) == -1) {
    close (fd);
    return -1;
  }
  return 0;
}

static const struct volume_ops thin_ops;

static struct thin *
thin_new (struct engine *e, const struct volume_config *cfg)
{
  struct thin *t = calloc (1, sizeof *t);
  pthread_condattr_t attr;

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
  t->slot = cfg->slot;
  t->shift = __builtin_ctzll (t->slot);
  t->read_only = t->v.limits.read_only;
  t->journal_limit = JOURNAL_LIMIT;
  t->id.slot = t->slot;
  t->id.size = t->v.size;
  t->id.backend_size = engine_size (e);
  t->id.backend = *engine_identity (e);
  pthread_mutex_init (&t->lock, NULL);
  pthread_mutex_init (&t->commit_lock, NULL);
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&t->changed, &attr);
  pthread_condattr_destroy (&attr);
  return t;
}

static void
thin_free (struct thin *t)
{
  thin_map_free (&t->map);
  if (t->fd >= 0)
    close (t->fd);
  pthread_cond_destroy (&t->changed);
  pthread_mutex_destroy (&t->commit_lock);
  pthread_mutex_destroy (&t->lock);
  free (t->buf);
  free (t->path);
  free (t);
}

static void
thin_close (struct volume *v)
{
  struct thin *t = thin_of (v);

  if (!t->read_only && commit (t, false) == 0) {
    pthread_mutex_lock (&t->commit_lock);
    checkpoint (t);
    pthread_mutex_unlock (&t->commit_lock);
  }
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
  .close = thin_close,
};

struct volume *
thin_volume_open (struct engine *e, const struct volume_config *cfg)
{
  struct thin *t;
  uint64_t nlogical;

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
  nlogical = (t->id.size + t->slot - 1) >> t->shift;
  if (thin_map_init (&t->map, nlogical,
                     (uint32_t) (engine_size (e) >> t->shift)) == -1 ||
      open_meta (t) == -1) {
    int saved_errno = errno;

    thin_free (t);
    errno = saved_errno;
    return NULL;
  }
  t->durable_seq = t->next_seq - 1;
  t->meta_bytes = t->journal_end;
  return &t->v;
}
