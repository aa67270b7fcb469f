/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the journal of the pending set on disk (invariant 10;
 * the format is in journal.c, the argument in docs/design-notes.md,
 * "Crash: the journal of the pending set").
 *
 * Every change to the pending map and the known-clean map is seen by
 * the maps' observer (extmap_set_observer) and appended, under the
 * engine lock, to a buffer of records, in the order the maps changed.
 * A commit writes the buffer to STATE.journal and fdatasyncs it; a
 * client's FLUSH (and a FUA write) waits for a commit covering every
 * record appended before it, so that every write acknowledged before
 * the FLUSH has its cancel on disk when the FLUSH is acknowledged.
 * Commits run on the journal's own thread, beside the FLUSH's backend
 * flush, and group: FLUSHes that come while one commit runs share the
 * next one.  When the journal grows past its bound, a checkpoint (the
 * state file, with both maps) replaces it.  At start the checkpoint and
 * the journal are replayed, and a fresh checkpoint is written before
 * the first request.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arith.h"
#include "cleanup.h"
#include "engine-internal.h"
#include "engine-test.h"
#include "fileio.h"
#include "grow.h"
#include "journal.h"
#include "log.h"
#include "state.h"
#include "verify.h"

/* The file is extended with zeros this far ahead of the records, so an
 * append changes no file size (its fdatasync writes no metadata).
 */
#define PREALLOC_STEP (UINT64_C (1) << 20)
/* Records buffered past this are written without waiting for a FLUSH
 * (memory only: durability comes with FLUSH and FUA).
 */
#define BUFFER_KICK (256 * JOURNAL_RECORD_SIZE * 4)
/* A checkpoint replaces the journal when it passes both: a fixed size,
 * and two records a pending or clean extent (so that the checkpoint's
 * O(extents) copy costs a constant per record as the maps grow).
 */
#define CHECKPOINT_MIN (UINT64_C (4) << 20)
#define CHECKPOINT_PER_EXTENT (2 * JOURNAL_RECORD_SIZE)

/* How far a commit takes the records: into the file (its page cache,
 * which outlives a crash of this process: invariant 10's kill -9
 * clause), to the device (sync_file_range: durable once the backend's
 * flush covers the file), or durable (fdatasync).
 */
enum commit_depth { COMMIT_CACHE, COMMIT_DEVICE, COMMIT_SYNC };

/* The journal's lock, for clang's analysis (common/lock.h).  Order:
 * the engine lock, then this one (records are appended with both).
 */
extern struct dc_capability journal_lock;

struct engine_journal {
  char *path;                       /* STATE.journal */
  pthread_mutex_t lock;             /* journal_lock */
  /* Two conditions, so that the many moves of durable_seq (one per
   * FLUSH where the backend's flush covers the journal) wake only the
   * requests waiting on them, not the commit thread each time.
   */
  pthread_cond_t changed;           /* durable or written moved, a commit
                                       ended */
  pthread_cond_t work;              /* the thread's: requested moved, or a
                                       commit ended with more asked; stop */
  /* Records appended and not yet taken by a commit. */
  unsigned char *buf GUARDED_BY (journal_lock);
  size_t len GUARDED_BY (journal_lock);
  size_t cap GUARDED_BY (journal_lock);
  uint64_t next_seq GUARDED_BY (journal_lock);     /* the next record's */
  uint64_t durable_seq GUARDED_BY (journal_lock);  /* all before it are */
  uint64_t written_seq GUARDED_BY (journal_lock);  /* on the device */
  uint64_t cached_seq GUARDED_BY (journal_lock);   /* in the file (its
                                                      page cache) */
  uint64_t requested GUARDED_BY (journal_lock);    /* commits asked up to */
  bool committing GUARDED_BY (journal_lock);       /* one commit at a time */
  bool lost GUARDED_BY (journal_lock);  /* a record had no memory: the
                                           next commit checkpoints */
  bool off GUARDED_BY (journal_lock);   /* given up after an error */
  int err GUARDED_BY (journal_lock);    /* commits fail with it */
  bool stopping GUARDED_BY (journal_lock);
  /* Whether the backend's flush makes the journal's completed writes
   * durable (backend_flush_covers): a FLUSH then writes the records
   * out without an fdatasync of its own.  Set before serving.
   */
  bool shared_flush;
  /* The file: only the committer touches these. */
  int fd;
  uint64_t file_end;                /* where the next record goes */
  uint64_t device_end;              /* the device has the file up to here */
  uint64_t file_alloc;              /* zeros written up to here */
  /* engine_test_set_journal_hook's, set before the threads start. */
  engine_journal_hook_fn *hook;
  void *hook_opaque;
  /* The thread that commits (started after the fork). */
  bool thread_running;
  pthread_t thread;
  /* Statistics. */
  uint64_t records GUARDED_BY (journal_lock);
  uint64_t commits GUARDED_BY (journal_lock);
  uint64_t write_throughs GUARDED_BY (journal_lock);  /* COMMIT_CACHE */
  uint64_t syncs GUARDED_BY (journal_lock);        /* its own fdatasyncs */
  uint64_t checkpoints GUARDED_BY (journal_lock);
  uint64_t replayed;                /* at start */
  uint64_t bytes GUARDED_BY (journal_lock);  /* the file's records */
};

DC_LOCK_WRAPPERS (journal, struct engine_journal, lock, journal_lock)

static inline void
journal_wait_drops_lock (struct engine_journal *j, pthread_cond_t *cond)
  REQUIRES (journal_lock) NO_THREAD_SAFETY_ANALYSIS
{
  pthread_cond_wait (cond, &j->lock);
}

bool
engine_journal_wanted (const struct engine *e)
{
  const struct engine_config *cfg = engine_keys (e);

  return cfg->state && cfg->journal && !cfg->passthrough &&
         !backend_limits (e->backend)->read_only;
}

/* Appending, under the engine lock. */

static void
append (struct engine_journal *j, enum journal_map map,
        enum extmap_observe_op op, uint64_t offset, uint64_t length)
{
  struct journal_record r = {
    .map = map, .op = op, .offset = offset, .length = length,
  };

  journal_acquire (j);
  if (j->off)
    goto out;
  if (j->len + JOURNAL_RECORD_SIZE > j->cap) {
    void *p = grow_array (j->buf, &j->cap, 1, 64 * JOURNAL_RECORD_SIZE);

    if (p == NULL) {
      /* The journal no longer tells the whole story: the next commit
       * writes a checkpoint of the maps instead.
       */
      j->lost = true;
      goto out;
    }
    j->buf = p;
  }
  r.seq = j->next_seq++;
  journal_record_encode (&r, j->buf + j->len);
  j->len += JOURNAL_RECORD_SIZE;
  j->records++;
  if (j->len >= BUFFER_KICK && j->thread_running && j->requested < j->next_seq) {
    j->requested = j->next_seq;
    pthread_cond_signal (&j->work);
  }
 out:
  journal_release (j);
}

static void
observe_pending (void *opaque, enum extmap_observe_op op, uint64_t offset,
                 uint64_t length)
{
  append (opaque, JOURNAL_PENDING, op, offset, length);
}

static void
observe_clean (void *opaque, enum extmap_observe_op op, uint64_t offset,
               uint64_t length)
{
  append (opaque, JOURNAL_CLEAN, op, offset, length);
}

/* The file. */

static int
write_zeros (int fd, uint64_t from, uint64_t to)
{
  static const unsigned char zeros[65536];

  while (from < to) {
    size_t n = MIN (to - from, sizeof zeros);

    if (pwrite_all (fd, zeros, n, from) == -1)
      return -1;
    from += n;
  }
  return 0;
}

/* A new journal after the checkpoint tagged (len, crc), its records
 * numbered from first_seq: written as path.tmp, made durable, renamed
 * over path.  The descriptor, or -1 reported.
 */
/* A new journal file: its header, then zeros preallocated behind it. */
static int
fill_new_file (int fd, void *header)
{
  if (pwrite_all (fd, header, JOURNAL_HEADER_SIZE, 0) == -1)
    return -1;
  return write_zeros (fd, JOURNAL_HEADER_SIZE, PREALLOC_STEP);
}

static int
create_file (struct engine *e, struct engine_journal *j, uint64_t ck_len,
             uint32_t ck_crc, uint64_t first_seq)
{
  struct journal_header h = {
    .checkpoint_len = ck_len, .checkpoint_crc = ck_crc,
    .first_seq = first_seq, .granularity = e->granularity,
    .backend_size = backend_size (e->backend),
  };
  unsigned char header[JOURNAL_HEADER_SIZE];
  const char *step;
  int fd;

  journal_header_encode (&h, header);
  fd = fileio_replace (j->path, 0600, FILEIO_KEEP_FD, fill_new_file, header,
                       &step);
  if (fd == -1)
    dc_error ("journal %s: cannot write it: cannot %s: %m", j->path, step);
  return fd;
}

/* Replace state file and journal by a checkpoint of the maps as they
 * are now; records appended before it are in it, later ones go to the
 * new journal.  Called by the committer (committing set), no lock held.
 * Crash between the two renames: the new state file and a journal
 * tagged for the old one, which is then not replayed; the state file
 * holds everything it held.
 */
static int
checkpoint (struct engine *e, struct engine_journal *j)
{
  CLEANUP_FREE void *image = NULL;
  const char *state = engine_keys (e)->state;
  struct state_header h = { .checksum = 0 };
  uint64_t seq;
  size_t len = 0;
  char why[64];
  int r, fd;

  engine_lock_acquire (e);
  journal_acquire (j);
  seq = j->next_seq;
  j->len = 0;
  j->lost = false;
  journal_release (j);
  r = engine_state_encode_locked (e, false, &image, &len);
  engine_lock_release (e);
  if (r == -1)
    return -1;
  if (image) {
    if (engine_state_write (state, image, len) == -1)
      return -1;
    state_read_header (image, len, &h, why, sizeof why);
  }
  else if ((unlink (state) == -1 && errno != ENOENT) || fsync_dir (state) == -1) {
    dc_error ("state=%s: cannot remove it: %m", state);
    return -1;
  }
  fd = create_file (e, j, image ? len : 0, h.checksum, seq);
  if (fd == -1)
    return -1;
  if (j->fd >= 0)
    close (j->fd);
  j->fd = fd;
  j->file_end = j->device_end = JOURNAL_HEADER_SIZE;
  j->file_alloc = PREALLOC_STEP;
  journal_acquire (j);
  j->durable_seq = MAX (j->durable_seq, seq);
  j->written_seq = MAX (j->written_seq, seq);
  j->cached_seq = MAX (j->cached_seq, seq);
  j->checkpoints++;
  j->bytes = 0;
  journal_release (j);
  return 0;
}

/* Whether the journal has outgrown the maps enough for a checkpoint. */
static bool
wants_checkpoint (struct engine *e, struct engine_journal *j)
{
  uint64_t extents;

  engine_lock_acquire (e);
  extents = extmap_count (e->map) + clean_extents (&e->clean);
  engine_lock_release (e);
  return j->file_end > MAX (CHECKPOINT_MIN, extents * CHECKPOINT_PER_EXTENT);
}

/* Append records to the file and take them to depth: durable, written
 * to the device for a backend flush to make durable, or only into the
 * file's page cache.  Each way the zeros they overwrite are durable first, so that writing them
 * allocates nothing and changes no size: no metadata of the file waits
 * for a flush of its own.
 */
static int
write_records (struct engine_journal *j, const void *records, size_t len,
               enum commit_depth depth)
{
  if (j->file_end + len > j->file_alloc) {
    uint64_t to = round_up (j->file_end + len + PREALLOC_STEP, PREALLOC_STEP);

    if (write_zeros (j->fd, j->file_alloc, to) == -1 ||
        fdatasync (j->fd) == -1)
      return -1;
    j->file_alloc = to;
  }
  if (pwrite_all (j->fd, records, len, j->file_end) == -1)
    return -1;
  j->file_end += len;
  /* Records a COMMIT_CACHE left in the page cache go to the device with
   * these: from device_end, not from this commit's first record.
   */
  if (depth == COMMIT_SYNC) {
    if (fdatasync (j->fd) == -1)
      return -1;
    j->device_end = j->file_end;
  }
  else if (depth == COMMIT_DEVICE && j->file_end > j->device_end) {
    if (sync_file_range (j->fd, j->device_end, j->file_end - j->device_end,
                         SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                         SYNC_FILE_RANGE_WAIT_AFTER) == -1)
      return -1;
    j->device_end = j->file_end;
  }
  return 0;
}

/* Give up on the journal after an error: nothing may be replayed that
 * does not hold every change, so the state file and the journal go
 * (the clean stop writes the state file again).  If they cannot go,
 * every later FLUSH fails: its promise could not be kept.
 */
static void
give_up_locked (struct engine *e, struct engine_journal *j)
  REQUIRES (journal_lock)
{
  const char *state = engine_keys (e)->state;

  j->off = true;
  j->len = 0;
  if ((unlink (j->path) == -1 && errno != ENOENT) ||
      (unlink (state) == -1 && errno != ENOENT) || fsync_dir (j->path) == -1) {
    dc_error ("journal %s: cannot remove it or state=%s after an error: %m; "
              "every FLUSH fails from now on", j->path, state);
    j->err = EIO;
    return;
  }
  dc_error ("journal %s: turned off after an error: pending discards are "
            "not kept across a crash until the next clean start", j->path);
  j->durable_seq = j->written_seq = j->cached_seq = j->next_seq;
}

/* Whether the thread's commits sync the journal.  Where the backend's
 * flush covers the journal, FLUSHes and FUA requests write the records
 * out themselves, so the thread's commits only bound the buffer (a kick
 * at BUFFER_KICK): a write-out does that, and the next FLUSH makes it
 * durable.  Elsewhere they make the records durable for the requests
 * that wait (engine_journal_wait).
 */
static bool
thread_commits_sync (const struct engine_journal *j)
{
  return !j->shared_flush;
}

/* The depth of the thread's commits. */
static enum commit_depth
thread_depth (const struct engine_journal *j)
{
  return thread_commits_sync (j) ? COMMIT_SYNC : COMMIT_DEVICE;
}

/* Every record before this sequence number has reached depth. */
static uint64_t
reached_locked (const struct engine_journal *j, enum commit_depth depth)
  REQUIRES (journal_lock)
{
  switch (depth) {
  case COMMIT_SYNC: return j->durable_seq;
  case COMMIT_DEVICE: return j->written_seq;
  default: return j->cached_seq;
  }
}

/* Whether the thread has a commit to run. */
static bool
thread_commit_wanted (const struct engine_journal *j)
  REQUIRES (journal_lock)
{
  return j->requested > reached_locked (j, thread_depth (j));
}

/* One commit of everything appended so far, committing taken; the lock
 * is dropped around the I/O.  Short of COMMIT_SYNC, the records wait for
 * a backend flush to be durable (engine_journal_flushed) or for a later
 * commit; a checkpoint is durable either way.
 */
static void
commit_once_drops_lock (struct engine *e, struct engine_journal *j,
                        enum commit_depth depth)
  REQUIRES (journal_lock)
{
  unsigned char *records;
  uint64_t upto = j->next_seq;
  size_t len = j->len;
  bool full = j->lost;
  bool sync = depth == COMMIT_SYNC;
  bool durable = sync;
  int r;

  j->committing = true;
  records = j->buf;
  j->buf = NULL;
  j->len = j->cap = 0;
  journal_release (j);
  if (j->hook)
    j->hook (j->hook_opaque, sync);
  if (!full)
    r = write_records (j, records, len, depth);
  else
    r = 0;
  free (records);
  if (r == 0 && (full || wants_checkpoint (e, j))) {
    r = checkpoint (e, j);
    durable = true;
  }
  else if (r == -1)
    dc_error ("journal %s: cannot write it: %m", j->path);
  journal_acquire (j);
  if (r == 0) {
    j->cached_seq = MAX (j->cached_seq, upto);
    if (durable || depth >= COMMIT_DEVICE)
      j->written_seq = MAX (j->written_seq, upto);
    if (durable)
      j->durable_seq = MAX (j->durable_seq, upto);
    j->syncs += sync && !full;
    j->write_throughs += depth == COMMIT_CACHE;
    j->commits++;
    j->bytes = j->file_end - JOURNAL_HEADER_SIZE;
  }
  else
    give_up_locked (e, j);
  j->committing = false;
  pthread_cond_broadcast (&j->changed);
  if (thread_commit_wanted (j))
    pthread_cond_signal (&j->work);
}

static void *
journal_thread (void *opaque)
{
  struct engine *e = opaque;
  struct engine_journal *j = e->journal;

  journal_acquire (j);
  while (!j->stopping) {
    /* One commit at a time: a FLUSH may be writing records out. */
    if (!j->off && !j->committing && thread_commit_wanted (j))
      commit_once_drops_lock (e, j, thread_depth (j));
    else
      journal_wait_drops_lock (j, &j->work);
  }
  journal_release (j);
  return NULL;
}

uint64_t
engine_journal_begin (struct engine *e)
{
  struct engine_journal *j = e->journal;
  uint64_t ticket;

  if (j == NULL)
    return 0;
  journal_acquire (j);
  ticket = j->next_seq;
  if (j->thread_running && j->requested < ticket) {
    j->requested = ticket;
    pthread_cond_signal (&j->work);
  }
  journal_release (j);
  return ticket;
}

/* Wait until the records before ticket (0: every record appended so
 * far) have reached depth (enum commit_depth), committing them on
 * this thread unless a committer is at it: the journal's thread for
 * durable commits once it runs, unless the backend's flush covers the
 * journal (its commits are write-outs then; before engine_start, in
 * tests, the caller commits itself), and the asking thread for
 * write-outs and write-throughs (no hand-over).  Commits group: whoever comes while one
 * runs shares the next.  *reached (may be NULL) gets the sequence
 * number reached.
 */
static int
commit_until (struct engine *e, struct engine_journal *j, uint64_t ticket,
              enum commit_depth depth, uint64_t *reached)
{
  int err;

  journal_acquire (j);
  if (ticket == 0)
    ticket = j->next_seq;
  while (!j->off && reached_locked (j, depth) < ticket) {
    if (j->committing ||
        (depth == COMMIT_SYNC && j->thread_running &&
         thread_commits_sync (j)))
      journal_wait_drops_lock (j, &j->changed);
    else
      commit_once_drops_lock (e, j, depth);
  }
  if (reached)
    *reached = reached_locked (j, depth);
  err = j->err;
  journal_release (j);
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

int
engine_journal_wait (struct engine *e, uint64_t ticket)
{
  if (e->journal == NULL)
    return 0;
  return commit_until (e, e->journal, ticket, COMMIT_SYNC, NULL);
}

bool
engine_journal_shares_flush (const struct engine *e)
{
  return e->journal != NULL && e->journal->shared_flush;
}

int
engine_journal_write_out (struct engine *e, uint64_t *covered)
{
  return commit_until (e, e->journal, 0, COMMIT_DEVICE, covered);
}

int
engine_journal_write_through (struct engine *e)
{
  if (e->journal == NULL)
    return 0;
  return commit_until (e, e->journal, 0, COMMIT_CACHE, NULL);
}

void
engine_journal_flushed (struct engine *e, uint64_t covered)
{
  struct engine_journal *j = e->journal;

  journal_acquire (j);
  if (covered > j->durable_seq) {
    j->durable_seq = covered;
    pthread_cond_broadcast (&j->changed);
  }
  journal_release (j);
}

void
engine_test_set_journal_hook (struct engine *e, engine_journal_hook_fn *fn,
                              void *opaque)
{
  if (e->journal) {
    e->journal->hook = fn;
    e->journal->hook_opaque = opaque;
  }
}

/* Loading. */

struct replay {
  struct engine *e;
  uint32_t ticks;
};

/* Apply one record as the maps' own calls did.  Without memory a
 * pending insert is lost (a discard never sent, counted) and a remove
 * takes out whole extents, so the replayed pending set never holds
 * more than the journalled one: nothing written is ever discarded.
 */
static int
replay_one (const struct journal_record *r, void *opaque)
  NO_THREAD_SAFETY_ANALYSIS     /* engine_journal_load holds the lock */
{
  struct replay *rp = opaque;
  struct engine *e = rp->e;
  struct extent x;

  /* What the annotation cannot see, checked where it can be. */
  DEBUG_VERIFY_HELD (&e->lock);
  /* An insert past the store's end was not written for it (the header
   * matched its size; a remove may pass the end by a granule's
   * rounding): it ends the journal as a torn record does, so that no
   * range read from a file reaches the forward path's contracts.
   */
  if (r->op == EXTMAP_OBSERVE_INSERT &&
      r->offset + r->length > backend_size (e->backend))
    return 1;
  if (r->map == JOURNAL_CLEAN) {
    if (r->op == EXTMAP_OBSERVE_INSERT)
      clean_discarded (&e->clean, r->offset, r->length);
    else if (r->op == EXTMAP_OBSERVE_REMOVE)
      clean_written (&e->clean, r->offset, r->length);
    else
      clean_forget_all (&e->clean, NULL, NULL);
    return 0;
  }
  switch (r->op) {
  case EXTMAP_OBSERVE_INSERT:
    if (extmap_insert (e->map, r->offset, r->length, rp->ticks) == -1) {
      e->stats.dropped++;
      e->stats.dropped_bytes += r->length;
      e->stats.dropped_nomem_bytes += r->length;
    }
    break;
  case EXTMAP_OBSERVE_REMOVE:
    if (extmap_remove (e->map, r->offset, r->length, NULL) == -1)
      while (extmap_find_overlap (e->map, r->offset, r->length, &x))
        extmap_remove (e->map, x.offset, x.length, NULL);
    /* Invariant 10: a range written before the crash is pending no
     * more, or replay would discard an acknowledged write.
     */
    DEBUG_VERIFY (!extmap_find_overlap (e->map, r->offset, r->length, &x));
    break;
  default:
    extmap_clear (e->map);
  }
  return 0;
}

/* After a crash, known-clean may claim what was written since the last
 * FLUSH (those writes' records were not durable).  Kept only where the
 * backend reports a hole: nothing landed there.  What did land was
 * written after the last completed FLUSH (a write before it has its
 * removal in the journal), so it carries no promise, and it is pending
 * now, as the pending set's ranges written since are: a file system
 * that crashed frees it again, and its fstrim finds it pending.  A
 * backend that reports no holes keeps no claim (dropped, counted).
 */
struct verify {
  struct engine *e;
  uint64_t moved, dropped;
};

static int
verify_run (uint64_t offset, uint64_t length, uint32_t type, void *opaque)
  NO_THREAD_SAFETY_ANALYSIS     /* called with the engine lock held */
{
  struct verify *v = opaque;
  struct engine *e = v->e;

  DEBUG_VERIFY_HELD (&e->lock);
  if (type & BACKEND_EXTENT_HOLE)
    return 0;
  clean_written (&e->clean, offset, length);
  if (extmap_insert (e->map, offset, length, engine_ticks_locked (e)) == 0)
    v->moved += length;
  return 0;
}

static int
collect_clean (const struct extent *x, void *opaque)
{
  struct extent **out = opaque;

  *(*out)++ = *x;
  return 0;
}

static void
verify_clean (struct engine *e, struct verify *v)
{
  struct backend *b = e->backend;
  CLEANUP_FREE struct extent *all = NULL;
  struct extent *end;
  uint64_t n;

  engine_lock_acquire (e);
  n = clean_extents (&e->clean);
  if (n == 0) {
    engine_lock_release (e);
    return;
  }
  if (!backend_limits (b)->can_extents ||
      (all = malloc (n * sizeof *all)) == NULL) {
    v->dropped = clean_bytes (&e->clean);
    clean_forget_all (&e->clean, NULL, NULL);
    engine_lock_release (e);
    return;
  }
  end = all;
  clean_iterate (&e->clean, collect_clean, &end);
  /* Nothing else runs yet: the engine is being opened.  The backend is
   * asked with the lock held (no other thread can wait on it).
   */
  for (struct extent *x = all; x < end; x++)
    if (backend_extents (b, x->offset, x->length, verify_run, v) == -1) {
      v->dropped += clean_bytes (&e->clean);
      clean_forget_all (&e->clean, NULL, NULL);
      break;
    }
  engine_lock_release (e);
}

/* The journal file, if it follows the checkpoint h (NULL: none) and
 * was made for this engine: 1 with it in *buf, else 0 (said why).
 */
static int
read_matching (struct engine *e, struct engine_journal *j,
               const struct state_header *h, size_t state_len,
               unsigned char **buf, size_t *len, struct journal_header *jh)
{
  char why[256];
  int r = engine_state_read (j->path, buf, len);

  if (r <= 0)
    return r;
  if (journal_header_decode (*buf, *len, jh, why, sizeof why) == -1)
    ;
  else if (jh->checkpoint_len != (h ? state_len : 0) ||
           jh->checkpoint_crc != (h ? h->checksum : 0))
    snprintf (why, sizeof why, "it follows another checkpoint than the "
              "state file (a clean stop, or a crash during a checkpoint)");
  else if (jh->granularity != e->granularity ||
           jh->backend_size != backend_size (e->backend))
    snprintf (why, sizeof why, "it was made for granularity %" PRIu64
              " and a backend of %" PRIu64 " bytes", jh->granularity,
              jh->backend_size);
  else
    return 1;
  dc_debug ("journal %s: not replayed: %s", j->path, why);
  free (*buf);
  *buf = NULL;
  return 0;
}

/* A fresh checkpoint before the first request; from now on the maps'
 * changes are recorded.
 */
static int
begin_recording (struct engine *e, struct engine_journal *j)
{
  if (checkpoint (e, j) == -1) {
    dc_error ("state=%s: cannot write a checkpoint; not serving, as an "
              "old one could be replayed after writes",
              engine_keys (e)->state);
    return -1;
  }
  j->shared_flush = backend_flush_covers (e->backend, j->fd);
  engine_lock_acquire (e);
  extmap_set_observer (e->map, observe_pending, j);
  clean_set_observer (&e->clean, observe_clean, j);
  engine_lock_release (e);
  return 0;
}

static int
journal_new (struct engine *e)
{
  struct engine_journal *j = calloc (1, sizeof *j);

  if (j == NULL || asprintf (&j->path, "%s.journal", engine_keys (e)->state) == -1) {
    free (j);
    dc_error ("journal: out of memory");
    errno = ENOMEM;
    return -1;
  }
  pthread_mutex_init (&j->lock, NULL);
  pthread_cond_init (&j->changed, NULL);
  pthread_cond_init (&j->work, NULL);
  j->fd = -1;
  journal_acquire (j);
  j->next_seq = j->durable_seq = j->written_seq = j->cached_seq =
    j->requested = 1;
  journal_release (j);
  e->journal = j;
  return 0;
}

int
engine_journal_load (struct engine *e)
{
  const char *path = engine_keys (e)->state;
  CLEANUP_FREE unsigned char *buf = NULL, *jbuf = NULL;
  struct state_identity now;
  struct state_header h;
  struct journal_header jh;
  struct engine_journal *j;
  struct verify v = { .e = e };
  size_t len = 0, jlen = 0;
  char why[512];
  bool have_state, have_journal;
  int r;

  if (journal_new (e) == -1)
    return -1;
  j = e->journal;
  r = engine_state_read (path, &buf, &len);
  if (r == -1)
    return -1;
  have_state = r == 1;
  if (have_state && state_read_header (buf, len, &h, why, sizeof why) == -1)
    goto refuse;
  r = read_matching (e, j, have_state ? &h : NULL, len, &jbuf, &jlen, &jh);
  if (r == -1)
    return -1;
  have_journal = r == 1;
  if (have_state) {
    engine_state_identity (e, &now);
    /* The backend's time changes with every write: after a crash (a
     * journal follows the file), or for a checkpoint written while
     * serving (time 0), it tells nothing.
     */
    if (have_journal || h.id.mtime_ns == 0)
      now.mtime_ns = h.id.mtime_ns;
    if (state_check_identity (&h, &now, why, sizeof why) == -1 ||
        state_decode_extents (buf, &h, NULL, NULL, why, sizeof why) == -1)
      goto refuse;
  }
  engine_lock_acquire (e);
  if (have_state)
    engine_state_apply_locked (e, buf, &h);
  if (have_journal) {
    struct replay rp = { .e = e, .ticks = engine_ticks_locked (e) };

    journal_replay (jbuf, jlen, &jh, replay_one, &rp, &j->replayed, NULL);
  }
  engine_lock_release (e);
  if (have_journal)
    verify_clean (e, &v);
  engine_lock_acquire (e);
  e->stats.journal_replayed_records = j->replayed;
  e->stats.journal_clean_unverified_bytes = v.dropped + v.moved;
  engine_enforce_bound_drops_lock (e);
  engine_lock_release (e);
  if (have_journal)
    dc_debug ("journal %s: replayed %" PRIu64 " records after an unclean "
              "stop; %" PRIu64 " known-clean bytes written since went back "
              "to pending, %" PRIu64 " could not be checked and were "
              "forgotten", j->path, j->replayed, v.moved, v.dropped);
  return begin_recording (e, j);

 refuse:
  if (unlink (j->path) == -1 && errno != ENOENT) {
    dc_error ("journal %s: cannot remove it: %m", j->path);
    return -1;
  }
  if (engine_state_reject (path, why) == -1)
    return -1;
  return begin_recording (e, j);
}

int
engine_journal_start (struct engine *e)
{
  struct engine_journal *j = e->journal;
  int err;

  if (j == NULL)
    return 0;
  err = pthread_create (&j->thread, NULL, journal_thread, e);
  if (err) {
    errno = err;
    dc_error ("journal: cannot start its thread: %m");
    return -1;
  }
  journal_acquire (j);
  j->thread_running = true;
  journal_release (j);
  return 0;
}

static void
stop_thread (struct engine_journal *j)
{
  bool running;

  journal_acquire (j);
  running = j->thread_running;
  j->stopping = true;
  pthread_cond_signal (&j->work);
  journal_release (j);
  if (running)
    pthread_join (j->thread, NULL);
  journal_acquire (j);
  j->thread_running = false;
  journal_release (j);
}

void
engine_journal_stop (struct engine *e, bool state_saved)
{
  struct engine_journal *j = e->journal;
  const char *state = engine_keys (e)->state;
  bool empty;

  if (j == NULL)
    return;
  stop_thread (j);
  /* Whatever happens next, the journal first holds every change. */
  engine_journal_wait (e, engine_journal_begin (e));
  if (!state_saved)
    return;
  engine_lock_acquire (e);
  empty = extmap_count (e->map) == 0 && clean_extents (&e->clean) == 0;
  extmap_set_observer (e->map, NULL, NULL);
  clean_set_observer (&e->clean, NULL, NULL);
  engine_lock_release (e);
  /* The state file written at this stop (none when both maps are
   * empty) holds everything: the journal, tagged for the checkpoint it
   * replaced, would not be replayed any more; it goes.
   */
  if ((empty && unlink (state) == -1 && errno != ENOENT) ||
      (unlink (j->path) == -1 && errno != ENOENT) || fsync_dir (j->path) == -1)
    dc_error ("journal %s: cannot remove it, or state=%s, at the stop: %m",
              j->path, state);
}

/* journal=off after a start with the journal: what it left is loaded
 * as with it, then both files go, as journal=off consumes its file.
 */
static int
retire (struct engine *e)
{
  struct engine_journal *j = e->journal;
  const char *state = engine_keys (e)->state;
  int r = 0;

  engine_lock_acquire (e);
  extmap_set_observer (e->map, NULL, NULL);
  clean_set_observer (&e->clean, NULL, NULL);
  engine_lock_release (e);
  if ((unlink (j->path) == -1 && errno != ENOENT) ||
      (unlink (state) == -1 && errno != ENOENT) || fsync_dir (state) == -1) {
    dc_error ("state=%s: cannot remove it or its journal after loading "
              "them: %m; not serving, as a crash would replay them later",
              state);
    r = -1;
  }
  engine_journal_free (e);
  return r;
}

int
engine_journal_load_left (struct engine *e)
{
  CLEANUP_FREE char *path = NULL;

  if (asprintf (&path, "%s.journal", engine_keys (e)->state) == -1) {
    dc_error ("journal: out of memory");
    return -1;
  }
  if (access (path, F_OK) == -1)
    return 0;
  dc_debug ("journal %s: journal=off, but a journal is there: replaying "
            "it, then removing it and the state file", path);
  if (engine_journal_load (e) == -1)
    return -1;
  return retire (e) == -1 ? -1 : 1;
}

void
engine_journal_free (struct engine *e)
{
  struct engine_journal *j = e->journal;

  if (j == NULL)
    return;
  stop_thread (j);
  if (j->fd >= 0)
    close (j->fd);
  journal_acquire (j);
  free (j->buf);
  journal_release (j);
  pthread_cond_destroy (&j->changed);
  pthread_cond_destroy (&j->work);
  pthread_mutex_destroy (&j->lock);
  free (j->path);
  free (j);
  e->journal = NULL;
}

void
engine_journal_stats (struct engine *e, struct engine_stats *st)
{
  struct engine_journal *j = e->journal;

  if (j == NULL)
    return;
  journal_acquire (j);
  st->journal_records = j->records;
  st->journal_commits = j->commits;
  st->journal_syncs = j->syncs;
  st->journal_write_throughs = j->write_throughs;
  st->journal_shared_flush = j->shared_flush;
  st->journal_checkpoints = j->checkpoints;
  st->journal_bytes = j->bytes;
  st->journal_on = !j->off;
  journal_release (j);
}
