/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the backend interface: the backend_* functions below,
 * the only way into a store, with an implementation per kind behind a
 * vtable private to backend/ (internal.h): a regular file (file.c), a
 * block device (blkdev.c), an NBD server reached through libnbd
 * (nbd.c) and a Ceph RBD image reached through librbd (rbd/).
 *
 * Every operation may be called from several threads at once.  Each
 * returns 0 on success or -1 with errno set, having reported the error
 * once with dc_error (except where a comment says it stays silent).
 */
#ifndef DISCARDCACHE_BACKEND_H
#define DISCARDCACHE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct backend;

/* What the store can do, probed once at open. */
struct backend_limits {
  bool read_only;          /* opened or only openable read-only */
  bool can_discard;        /* discard reaches the store (not a no-op) */
  bool can_zero;           /* efficient zeroing (else zero writes zeros) */
  bool can_fua;            /* per-write durability without a full flush */
  bool can_flush;          /* flush means something */
  bool can_extents;        /* extents() reports holes */
  bool discard_zeroes;     /* discarded ranges read back as zeros */
  bool zero_unmaps;        /* a zero with may_trim deallocates whole
                              blocks as a discard does (file: the same
                              hole punch) */
  bool can_multi_conn;     /* a flush covers writes made by any caller */
  uint32_t discard_granularity; /* bytes, a power of two, >= 1 */
  /* The granularity=auto default when larger than discard_granularity
   * (0: none): the unit the store frees whole, an RBD object, where
   * smaller discards are accepted but free less or nothing.
   */
  uint32_t discard_preferred;
  /* free_space answers 0 free while the store itself says it is full
   * (RBD: the OSD map flags the pool nearfull, full or over its quota),
   * so a low-water mark of one byte means "when the store says so".
   */
  bool free_says_full;
  uint64_t max_discard;    /* largest single discard in bytes (> 0) */
  uint32_t min_block;      /* block size constraints; 0 = none known */
  uint32_t pref_block;
  uint32_t max_block;
};

/* Who the store is, so saved state is never applied to another one. */
struct backend_identity {
  char kind[8];            /* "file", "blkdev", "nbd", "rbd" */
  dev_t dev;               /* st_dev (file) or st_rdev (blkdev); 0 otherwise */
  ino_t ino;               /* st_ino for a file; 0 otherwise */
  char name[256];          /* canonical path or the URI */
  /* A name that follows the store when a reboot renumbers it (the
   * disk's WWID or serial, the dm uuid, a loop device's backing file;
   * a file's inode on such a disk): what saved state is tied to
   * (backend_saved_identity).  Empty where there is none.
   */
  char stable[256];
};

/* Called for each run of extents(): [offset, offset+length) has type
 * flags (BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO, or 0 for data).  It
 * may run on another thread of the backend's (the NBD backend's reader)
 * while extents() waits, so it only records what it is told and never
 * calls the backend.
 */
#define BACKEND_EXTENT_HOLE 1
#define BACKEND_EXTENT_ZERO 2
typedef int (*backend_extent_fn) (uint64_t offset, uint64_t length,
                                  uint32_t type, void *opaque);

/* How fresh the figures are that a backend reads in the background
 * (RBD: the space held and the pool's free space, backend/rbd/rbd-space.c),
 * for the statistics: an operator must see that a figure is old, and
 * why, during an outage.
 */
struct backend_readings {
  int64_t allocated_age_ms;     /* since the last good reading; -1: none */
  int allocated_error;          /* the last attempt's errno; 0: it worked */
  int64_t free_age_ms;
  int free_error;
};

/* The identity a state file, a journal or thin mode's meta file records
 * for the store id names: with a stable name, the kind and that name
 * alone (device numbers change at a reboot); else id as it is.
 */
extern void backend_saved_identity (const struct backend_identity *id,
                                    struct backend_identity *out)
  __attribute__ ((nonnull (1, 2)));

/* The RBD backend's settings (backend/rbd/): NULL or 0 fields take the
 * defaults rbd(8) has, and a 30 s bound.
 */
struct backend_rbd_options {
  const char *conf;        /* Ceph configuration file (rbd-conf=) */
  const char *id;          /* client id, client.ID (rbd-id=) */
  const char *keyring;     /* keyring file (rbd-keyring=) */
  uint64_t timeout_ms;     /* bound on cluster operations (rbd-timeout=) */
  /* Where the RBD backend records which client of this server holds the
   * image's lock, so that a restart can fence a crashed instance of it
   * (the service's state= with ".holder" appended; NULL: no record, and
   * a dead holder's lock is waited out).
   */
  const char *holder_file;
};

/* How to open a store, beyond its spec. */
struct backend_options {
  bool read_only;
  /* low-water= is set: the store's free space must be readable before
   * serving (RBD: a cluster without ceph-mgr has no pool statistics).
   */
  bool need_free_space;
  const struct backend_rbd_options *rbd; /* NULL: every default */
};

/* Open spec: a libnbd URI (nbd:, nbds:, nbd+unix:, nbds+unix:,
 * nbd+vsock:) goes to the nbd backend, rbd:POOL/[NAMESPACE/]IMAGE[@SNAP]
 * to the rbd backend; otherwise a path, which is a block device
 * (S_ISBLK) or a regular file.  Returns NULL with errno set and the
 * reason reported (naming the key and the accepted forms).
 */
extern struct backend *backend_open_with (const char *spec,
                                          const struct backend_options *o)
  __attribute__ ((nonnull (2)));

/* The errno a failed data operation (pread, pwrite, zero, discard,
 * flush) reports to the layers above, the same for every backend
 * (docs/reliability.md, "Errors a client sees"): ENOSPC for a full
 * store or quota (ENOSPC, EDQUOT, EFBIG); the errnos NBD has a name for
 * (EIO, EPERM, EROFS, ENOMEM, EINVAL, EOVERFLOW, ENOTSUP, EOPNOTSUPP) as
 * they are; anything else, a timeout, a lost connection or cluster, a
 * fenced (blocklisted) client included, EIO.  The data operations below
 * return it, so that no errno the client cannot read (nbdkit sends an
 * unknown one as EINVAL) leaves the backend.
 */
extern int backend_errno (int err);

/* What the store is: its size in bytes, what it can do, who it is. */
extern uint64_t backend_size (const struct backend *b)
  __attribute__ ((nonnull (1)));
extern const struct backend_limits *backend_limits (const struct backend *b)
  __attribute__ ((nonnull (1)));
extern const struct backend_identity *
backend_identity (const struct backend *b) __attribute__ ((nonnull (1)));

/* The data operations, the only way to reach the store.  Each may be
 * called from several threads at once and returns 0, or -1 with errno
 * mapped by backend_errno, having reported the error once (a discard's
 * EOPNOTSUPP silently: the engine turns forwarding off and says so).
 * zero: the range reads back as zeros; may_trim allows deallocating.
 */
extern int backend_pread (struct backend *b, void *buf, uint32_t count,
                          uint64_t offset) __attribute__ ((nonnull (1, 2)));
extern int backend_pwrite (struct backend *b, const void *buf, uint32_t count,
                           uint64_t offset, bool fua)
  __attribute__ ((nonnull (1, 2)));
extern int backend_zero (struct backend *b, uint64_t offset, uint64_t length,
                         bool may_trim, bool fua) __attribute__ ((nonnull (1)));
extern int backend_discard (struct backend *b, uint64_t offset,
                            uint64_t length, bool fua)
  __attribute__ ((nonnull (1)));
extern int backend_flush (struct backend *b) __attribute__ ((nonnull (1)));

/* Describe [offset, offset+length) run by run (backend_extent_fn).  -1
 * with errno EOPNOTSUPP, silently, where the backend has no way to ask
 * (a store that has one may still answer everything as data: see
 * can_extents); other errors are reported.
 */
extern int backend_extents (struct backend *b, uint64_t offset,
                            uint64_t length, backend_extent_fn fn,
                            void *opaque) __attribute__ ((nonnull (1, 4)));

/* Whether backend_free_space can answer (a file, RBD; not a block
 * device nor an NBD server: nothing tells there).
 */
extern bool backend_has_free_space (const struct backend *b)
  __attribute__ ((nonnull (1)));

/* The store's free space and total size in bytes, for low-water=, read
 * on the flusher's schedule, never on the data path
 * (cache/engine/engine-pressure.c).  -1 with errno EOPNOTSUPP, silently,
 * without backend_has_free_space; other errors are reported.
 */
extern int backend_free_space (struct backend *b, uint64_t *free,
                               uint64_t *total)
  __attribute__ ((nonnull (1, 2, 3)));

/* backend_open_with and default options but read_only. */
extern struct backend *backend_open (const char *spec, bool read_only);

/* Keep other servers off the store for as long as it is open: an
 * exclusive lock, or a shared one when it is read-only.  A regular file
 * takes an OFD lock on its whole length (backend/lock.c), which survives
 * fork and goes with the last descriptor; the other kinds have nothing
 * to lock here (a block device opened for writing is already O_EXCL).
 * 0, or -1 with errno EAGAIN when another process holds it (reported,
 * naming its pid when /proc shows it).
 */
extern int backend_lock (struct backend *b);

/* Proof of effect: how many bytes of [offset, offset+length) the store
 * still holds allocated, from extents().  -1 with errno EOPNOTSUPP,
 * silently, when the backend cannot tell (no extents); other errors
 * are reported.
 */
extern int backend_range_allocated (struct backend *b, uint64_t offset,
                                    uint64_t length, uint64_t *allocated);

/* Start the backend's own threads, once, after any fork (a thread does
 * not survive nbdkit's or FUSE's daemonising): until then requests run
 * on the caller's thread alone, one at a time.  0, or -1 with errno set
 * (reported).
 */
extern int backend_start (struct backend *b);

/* Whether b's flush also makes durable what was written to the file fd
 * and had completed (sync_file_range WAIT_AFTER) before the flush began:
 * true only where the file system is known to flush the device's cache
 * in every fdatasync of b's file, and fd is on that file system.
 */
extern bool backend_flush_covers (struct backend *b, int fd)
  __attribute__ ((nonnull (1)));

/* Start writing back what b's next flush will wait for (no waiting; a
 * no-op where the backend has nothing to start).
 */
extern void backend_flush_start (struct backend *b)
  __attribute__ ((nonnull (1)));

/* A store whose connection cannot cross a fork (librados runs threads,
 * which a fork leaves behind in the parent) is checked, opened and
 * locked by backend_open and backend_lock in the parent, so that every
 * error is reported before the front-end forks; backend_before_fork
 * then closes it (lock released), and backend_after_fork, in the
 * process that serves, opens and locks it again.  No-ops for the other
 * stores.  0, or -1 with errno set (reported).
 */
extern int backend_before_fork (struct backend *b);
extern int backend_after_fork (struct backend *b);

/* The bytes the store holds for the data (st_blocks of a file, the
 * objects of an RBD image as `rbd du` counts them), at a bounded cost:
 * a backend whose answer costs O(size) recomputes it at most every few
 * seconds and otherwise answers what it found last.  Not for the data
 * path.  0, or -1 with errno ENOTSUP (silently) when the store cannot
 * tell, or another errno (reported).
 */
extern int backend_allocated (struct backend *b, uint64_t *bytes);

/* How old the backend's background figures are, without waiting.  0,
 * or -1 with errno ENOTSUP (silently) for a backend that reads nothing
 * in the background (its figures are read when asked).
 */
extern int backend_readings (struct backend *b, struct backend_readings *r)
  __attribute__ ((nonnull (1, 2)));

/* Close the backend (NULL is allowed). */
extern void backend_close (struct backend *b);

/* Whether spec looks like an NBD URI rather than a path. */
extern bool backend_spec_is_uri (const char *spec);

/* Whether spec names an RBD image (starts with rbd:). */
extern bool backend_spec_is_rbd (const char *spec);

#endif /* DISCARDCACHE_BACKEND_H */
