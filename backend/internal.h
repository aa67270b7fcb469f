/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what the backend implementations share: the vtable
 * and struct backend behind backend.h's functions, and helpers.  Not
 * part of the interface: only the files in backend/ include it (and
 * the tests' own backends, tests/unit/mem-backend.c).
 */
#ifndef DISCARDCACHE_BACKEND_INTERNAL_H
#define DISCARDCACHE_BACKEND_INTERNAL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "arith.h"
#include "backend.h"
#include "verify.h"

struct backend_ops {
  const char *kind;
  int (*pread) (struct backend *b, void *buf, uint32_t count, uint64_t offset);
  int (*pwrite) (struct backend *b, const void *buf, uint32_t count,
                 uint64_t offset, bool fua);
  /* Make the range read back as zeros.  may_trim allows deallocating. */
  int (*zero) (struct backend *b, uint64_t offset, uint64_t length,
               bool may_trim, bool fua);
  /* Discard the range; EOPNOTSUPP is returned silently (the engine turns
   * forwarding off and says so), other errors are reported.
   */
  int (*discard) (struct backend *b, uint64_t offset, uint64_t length,
                  bool fua);
  int (*flush) (struct backend *b);
  /* Optional (backend_flush_covers): whether this backend's flush also
   * makes durable the writes to the file fd that completed before the
   * flush was called, and (flush_start) start writing back what the
   * next flush has to write, without waiting.  file: fd on the same
   * ext4 or XFS file system (docs/design-notes.md, "One flush for the
   * journal and the backend").
   */
  bool (*flush_covers) (struct backend *b, int fd);
  void (*flush_start) (struct backend *b);
  /* Optional (NULL when !can_extents): describe [offset, offset+length).
   * BACKEND_EXTENT_HOLE must mean deallocated: proof of effect
   * (backend_range_allocated) takes what is not a hole for space a
   * discard left allocated.  file: SEEK_DATA/SEEK_HOLE; nbd: block status
   * base:allocation where the server offers it; blkdev: none (nothing
   * reliable says what a device freed).  A new backend gives proof of
   * effect by implementing this (RBD: rbd_diff_iterate2 over the range,
   * whole_object false: what it does not report is a hole).
   */
  int (*extents) (struct backend *b, uint64_t offset, uint64_t length,
                  backend_extent_fn fn, void *opaque);
  /* Optional: the store's free space and total size in bytes, for
   * low-water= (cache/engine/engine-pressure.c), read on the flusher's schedule, never
   * on the data path.  A file: statvfs of the file system holding it.
   * Not offered where nothing tells: a block device (the kernel reports
   * no free space, and a dm-thin LV's pool usage is only in the pool's
   * dmsetup status) and an NBD server (the protocol has no such query).
   * RBD (backend/rbd/rbd-space.c): what the pool can still store, from the
   * monitor (df's MAX AVAIL, less if its quota leaves less), cached.
   */
  int (*free_space) (struct backend *b, uint64_t *free, uint64_t *total);
  /* Optional: lock the store against other servers (backend_lock). */
  int (*lock) (struct backend *b);
  /* Optional: start the backend's own threads (backend_start). */
  int (*start) (struct backend *b);
  /* Optional: the bytes the store holds for the data (backend_allocated). */
  int (*allocated) (struct backend *b, uint64_t *bytes);
  /* Optional: how old the figures above are (backend_readings). */
  int (*readings) (struct backend *b, struct backend_readings *r);
  /* Optional: let go of what a fork would break, and take it again
   * (backend_before_fork, backend_after_fork).
   */
  int (*before_fork) (struct backend *b);
  int (*after_fork) (struct backend *b);
  void (*close) (struct backend *b);
};

/* Fields common to every backend; implementations embed this first.
 * Only backend/ (and the tests' own backends) see inside it: the layers
 * above call the backend_* functions of backend.h, which map errno.
 */
struct backend {
  const struct backend_ops *ops;
  uint64_t size;
  struct backend_limits limits;
  struct backend_identity identity;
};

/* Implementations, called by backend_open. */
extern struct backend *backend_file_open (const char *path, int fd,
                                          bool read_only);
extern struct backend *backend_blkdev_open (const char *path, int fd,
                                            bool read_only);
extern struct backend *backend_nbd_open (const char *uri, bool read_only);
extern struct backend *backend_rbd_open (const char *spec,
                                         const struct backend_options *o);

/* The largest discard any backend reports (max_discard): 1 GiB, the
 * largest discard the Linux block layer and its NBD client send.  One
 * discard is one syscall or one NBD request that holds the store (a
 * non-queued TRIM, the inode lock of a hole punch) until it ends, so a
 * bound keeps each step of the flusher short enough to stay out of the
 * way of writes that arrive meanwhile.
 */
#define BACKEND_MAX_DISCARD (UINT64_C (1) << 30)

/* Check [offset, offset+length) against the size of b before an
 * operation named op.  Reports and fails with EINVAL if the sum
 * overflows, with beyond_errno if the range ends past the end (nbdkit's
 * choice: ENOSPC for writes and zeroes, EINVAL for reads and discards),
 * and with EROFS for writing operations (is_write) on a read-only store.
 */
extern int backend_check_range (struct backend *b, const char *op,
                                 uint64_t offset, uint64_t length,
                                 bool is_write, int beyond_errno)
  __attribute__ ((nonnull (1, 2)));

/* Cut a discard, already range-checked, inward to whole granules of
 * b's discard granularity (a discard is a hint: dropping a partial head
 * and tail is allowed, and the store would ignore or refuse them).
 * Returns false when no whole granule is left.  Not for stores that
 * promise discard_zeroes.
 */
extern bool backend_discard_align (struct backend *b, uint64_t *offset,
                                   uint64_t *length)
  __attribute__ ((nonnull (1, 2, 3)));

/* Zero a range by writing zeroes through b->ops->pwrite in chunks (the
 * fallback when the store has no efficient zero).
 */
extern int backend_write_zeroes (struct backend *b, uint64_t offset,
                                 uint64_t length, bool fua)
  __attribute__ ((nonnull (1)));

/* Why the block device st (open failed with EBUSY) is busy, for the
 * message: the processes that have it open ("open exclusively by pid
 * 1234 (nbdkit, discardcache)"), its mount point, or the dm/md device
 * built on it (lock.c).
 */
extern void backend_explain_busy (const struct stat *st, char *buf, size_t n)
  __attribute__ ((nonnull (1, 2)));

/* A name for the block device dev that survives renumbering: its dm
 * uuid, WWID or serial, or a loop device's backing file, with "-partN"
 * for a partition; false when it has none (stable-id.c).
 */
extern bool backend_stable_name (dev_t dev, char *buf, size_t n)
  __attribute__ ((nonnull (2)));

/* Copy the name (truncated to fit) into the identity. */
extern void backend_set_identity (struct backend *b, const char *kind,
                                  dev_t dev, ino_t ino, const char *name)
  __attribute__ ((nonnull (1, 2, 5)));

/* The part shared by the backends on a file descriptor (file.c and
 * blkdev.c embed it first; it embeds struct backend first).
 */
struct fd_backend {
  struct backend b;
  int fd;
  atomic_bool can_dsync;        /* pwritev2 (RWF_DSYNC) works */
};

/* Set up h (already zeroed) around an open fd. */
extern void fd_backend_init (struct fd_backend *h, const struct backend_ops *ops,
                             int fd, bool read_only)
  __attribute__ ((nonnull (1, 2)));

/* The ops both fd backends use as they are. */
extern int fd_backend_pread (struct backend *b, void *buf, uint32_t count,
                             uint64_t offset);
extern int fd_backend_pwrite (struct backend *b, const void *buf,
                              uint32_t count, uint64_t offset, bool fua);
extern int fd_backend_flush (struct backend *b);
extern void fd_backend_close (struct backend *b);

/* backend_lock for a store on fd (lock.c). */
extern int backend_lock_fd (struct backend *b, int fd)
  __attribute__ ((nonnull (1)));

/* fdatasync when fua is set (after a zero or a discard). */
extern int fd_backend_sync_if (struct backend *b, bool fua);

/* True for the errnos that mean "this operation is not supported". */
static inline bool
backend_is_enotsup (int err)
{
  return err == ENOTSUP || err == EOPNOTSUPP;
}

/* backend_discard_align where a discard goes to the store, with its
 * contract checked: the granularity the backend settled on at open is a
 * power of two (the cut uses masks), and what is sent is whole granules
 * inside the range asked for (a discard wider than asked destroys data
 * the client wrote: invariant 1).
 */
static inline bool
backend_discard_align_verified (struct backend *b, uint64_t *offset,
                                uint64_t *length)
{
  const uint64_t lo = *offset, hi = *offset + *length;
  const uint64_t g = b->limits.discard_granularity;

  VERIFY (is_power_of_2 (g));
  if (!backend_discard_align (b, offset, length))
    return false;
  VERIFY3U (*offset, >=, lo);
  VERIFY3U (*offset + *length, <=, hi);
  VERIFY3U ((*offset | *length) & (g - 1), ==, 0);
  return true;
}

#endif /* DISCARDCACHE_BACKEND_INTERNAL_H */
