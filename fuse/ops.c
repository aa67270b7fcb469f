/* SPDX-License-Identifier: BSD-3-Clause */
/* discardfuse: the low-level FUSE callbacks.  The tree is fixed (a root
 * directory holding `disk` and `stats`), so the low-level API serves it
 * with no path lookups or node table; each data callback dispatches on
 * the inode to disk.c or statsnode.c.
 *
 * The low-level API rather than the high-level one: it hands over the
 * fallocate mode, the open flags and fuse_conn_info untouched, replies
 * straight from the worker thread, and lets main.c order mount,
 * daemonising and the service's threads themselves (service_start after the
 * fork).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "arith.h"
#include "discardfuse.h"
#include "log.h"

/* The image's attributes never change under the kernel, so it may keep
 * them; the statistics file's size changes with every snapshot.
 */
#define STABLE_TIMEOUT 3600.0

static const struct {
  const char *name;
  fuse_ino_t ino;
} entries[] = {
  { ".", DF_INO_ROOT },
  { "..", DF_INO_ROOT },
  { "disk", DF_INO_DISK },
  { "stats", DF_INO_STATS },
};
#define N_ENTRIES (sizeof entries / sizeof entries[0])

/* Fill st for ino; -1 with errno ENOENT for an unknown inode. */
static int
node_attr (struct dfuse *df, fuse_ino_t ino, struct stat *st)
{
  memset (st, 0, sizeof *st);
  st->st_ino = ino;
  st->st_uid = df->uid;
  st->st_gid = df->gid;
  st->st_atim = st->st_mtim = st->st_ctim = df->start;
  st->st_blksize = df->granularity;
  switch (ino) {
  case DF_INO_ROOT:
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
    return 0;
  case DF_INO_DISK:
    st->st_mode = S_IFREG | (df->read_only ? 0400 : 0600);
    st->st_nlink = 1;
    st->st_size = df->size;
    st->st_blocks = (df->size + 511) / 512;
    return 0;
  case DF_INO_STATS:
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = statsnode_size (df);
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
  }
  errno = ENOENT;
  return -1;
}

static double
node_timeout (fuse_ino_t ino)
{
  return ino == DF_INO_STATS ? 0.0 : STABLE_TIMEOUT;
}

/* Tell what was negotiated; the kernel may grant less than asked. */
static void
dfuse_init (void *userdata, struct fuse_conn_info *conn)
{
  struct dfuse *df = userdata;

  conn->max_write = DF_MAX_IO;
  if (df->conn_opts)
    fuse_apply_conn_info_opts (df->conn_opts, conn);
  /* Never for the image: writes would sit in the page cache unseen by
   * the engine, and the kernel would need setattr (args.c refuses
   * -o writeback_cache with the reason).
   */
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  dc_debug ("fuse: protocol %u.%u, max_write %u, max_read %u, "
            "max_background %u, async_dio %s", conn->proto_major,
            conn->proto_minor, conn->max_write, conn->max_read,
            conn->max_background,
            conn->want & FUSE_CAP_ASYNC_DIO ? "yes" : "no");
}

static void
dfuse_lookup (fuse_req_t req, fuse_ino_t parent, const char *name)
{
  struct dfuse *df = fuse_req_userdata (req);
  struct fuse_entry_param e = { 0 };
  size_t i;

  if (parent != DF_INO_ROOT) {
    fuse_reply_err (req, ENOTDIR);
    return;
  }
  for (i = 2; i < N_ENTRIES; i++)
    if (strcmp (name, entries[i].name) == 0)
      break;
  if (i == N_ENTRIES) {
    fuse_reply_err (req, ENOENT);
    return;
  }
  e.ino = entries[i].ino;
  node_attr (df, e.ino, &e.attr);
  e.attr_timeout = e.entry_timeout = node_timeout (e.ino);
  fuse_reply_entry (req, &e);
}

static void
dfuse_getattr (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  struct dfuse *df = fuse_req_userdata (req);
  struct stat st;

  if (node_attr (df, ino, &st) == -1)
    fuse_reply_err (req, errno);
  else
    fuse_reply_attr (req, &st, node_timeout (ino));
}

/* Only what leaves the image as it is: times (not stored) and its own
 * size.  The image cannot be resized, chmod-ed or chown-ed.
 */
static void
dfuse_setattr (fuse_req_t req, fuse_ino_t ino, struct stat *attr,
               int to_set, struct fuse_file_info *fi)
{
  struct dfuse *df = fuse_req_userdata (req);
  const int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
    FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
  struct stat st;

  if (node_attr (df, ino, &st) == -1) {
    fuse_reply_err (req, errno);
    return;
  }
  if ((to_set & FUSE_SET_ATTR_SIZE) &&
      (ino != DF_INO_DISK || (uint64_t) attr->st_size != df->size)) {
    fuse_reply_err (req, ino == DF_INO_DISK ? EINVAL : EACCES);
    return;
  }
  if (to_set & ~(times | FUSE_SET_ATTR_SIZE)) {
    fuse_reply_err (req, EPERM);
    return;
  }
  fuse_reply_attr (req, &st, node_timeout (ino));
}

static void
dfuse_readdir (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
               struct fuse_file_info *fi)
{
  char buf[512];
  size_t used = 0, room = MIN (size, sizeof buf);

  if (ino != DF_INO_ROOT) {
    fuse_reply_err (req, ENOTDIR);
    return;
  }
  for (size_t i = off < 0 ? N_ENTRIES : (size_t) off; i < N_ENTRIES; i++) {
    struct stat st = {
      .st_ino = entries[i].ino,
      .st_mode = entries[i].ino == DF_INO_ROOT ? S_IFDIR : S_IFREG,
    };
    size_t n = fuse_add_direntry (req, buf + used, room - used,
                                  entries[i].name, &st, i + 1);
    if (n > room - used)
      break;
    used += n;
  }
  fuse_reply_buf (req, buf, used);
}

static void
dfuse_open (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  switch (ino) {
  case DF_INO_DISK: disk_open (req, fi); break;
  case DF_INO_STATS: statsnode_open (req, fi); break;
  case DF_INO_ROOT: fuse_reply_err (req, EISDIR); break;
  default: fuse_reply_err (req, ENOENT);
  }
}

static void
dfuse_read (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
            struct fuse_file_info *fi)
{
  if (ino == DF_INO_DISK)
    disk_read (req, size, off);
  else
    statsnode_read (req, size, off, fi);
}

/* flush comes at every close(): only a handle that could write the
 * image has anything to make durable, and probes (blkid, udev) open it
 * read-only often.
 */
static void
dfuse_flush (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  disk_sync (req, ino == DF_INO_DISK && fi->fh);
}

static void
dfuse_fsync (fuse_req_t req, fuse_ino_t ino, int datasync,
             struct fuse_file_info *fi)
{
  disk_sync (req, ino == DF_INO_DISK);
}

static void
dfuse_release (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  if (ino == DF_INO_STATS)
    statsnode_release (req, fi);
  else
    fuse_reply_err (req, 0);
}

/* loop takes its discard_granularity from f_bsize (libfuse's default
 * answer, 512, would have loop send discards the engine can only keep
 * as sub-granule fragments), so answer with the engine's granularity.
 */
static void
dfuse_statfs (fuse_req_t req, fuse_ino_t ino)
{
  struct dfuse *df = fuse_req_userdata (req);
  struct statvfs sv = {
    .f_bsize = df->granularity,
    .f_frsize = df->granularity,
    .f_blocks = df->size / df->granularity,
    .f_files = N_ENTRIES - 1,
    .f_namemax = 255,
  };

  fuse_reply_statfs (req, &sv);
}

const struct fuse_lowlevel_ops dfuse_ops = {
  .init      = dfuse_init,
  .lookup    = dfuse_lookup,
  .getattr   = dfuse_getattr,
  .setattr   = dfuse_setattr,
  .readdir   = dfuse_readdir,
  .open      = dfuse_open,
  .read      = dfuse_read,
  /* Only the image can be opened for writing, and the kernel sends
   * these only on a handle opened for writing.
   */
  .write     = disk_write,
  .fallocate = disk_fallocate,
  .flush     = dfuse_flush,
  .fsync     = dfuse_fsync,
  .release   = dfuse_release,
  .statfs    = dfuse_statfs,
};
