/* SPDX-License-Identifier: BSD-3-Clause */
/* discardfuse: the FUSE front-end.  A mount holding one image file,
 * `disk`, served by the engine, and a read-only `stats` file, so that
 * `losetup` gives a block device without the kernel nbd module.
 *
 * One context struct, struct dfuse, holds all of the front-end's state:
 * main.c owns it, args.c fills it from the command line, and the FUSE
 * callbacks (ops.c, disk.c, statsnode.c) reach it through
 * fuse_req_userdata.
 */
#ifndef DISCARDFUSE_H
#define DISCARDFUSE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "service.h"
#include "volume.h"

/* The root directory and its two files; the inode numbers never change. */
enum {
  DF_INO_ROOT = FUSE_ROOT_ID,
  DF_INO_DISK,
  DF_INO_STATS,
};

/* Largest read or write request: 1 MiB, the most libfuse 3.14 can take
 * (its receive buffer is 256 pages) and the kernel's default
 * max_pages_limit.  The kernel then sends loop's requests of up to
 * 1 MiB whole instead of cutting them into 128 KiB pieces.
 */
#define DF_MAX_IO (1024 * 1024)

struct dfuse {
  /* From the command line (args.c). */
  struct service_config cfg;
  char *mountpoint;                 /* absolute path */
  char *positional[2];              /* [BACKEND] MOUNTPOINT as typed */
  struct fuse_args fuse_args;       /* what is left for libfuse */
  struct fuse_cmdline_opts opts;    /* -f, -d, -s, clone_fd, threads */
  struct fuse_conn_info_opts *conn_opts; /* -o max_write= and friends */

  /* Set by main.c before the first request, then only read. */
  struct service *service;
  struct volume *volume;            /* the service's */
  uint64_t size;                    /* of the image, fixed */
  uint64_t granularity;             /* the engine's: statfs f_bsize */
  bool read_only;
  uid_t uid;
  gid_t gid;
  struct timespec start;            /* every node's times */
};

/* args.c: parse argv into df.  Returns 0 to go on, 1 when there is
 * nothing more to do (--help, --version), -1 on bad input (reported,
 * nothing changed on the system).  dfuse_free_args releases it all.
 */
extern int dfuse_parse_args (struct dfuse *df, int argc, char *argv[]);
extern void dfuse_free_args (struct dfuse *df);

/* ops.c: the low-level callbacks, dispatching on the inode. */
extern const struct fuse_lowlevel_ops dfuse_ops;

/* disk.c: the image file.  write and fallocate are the FUSE callbacks
 * themselves: no other file can be written.
 */
extern void disk_open (fuse_req_t req, struct fuse_file_info *fi);
extern void disk_read (fuse_req_t req, size_t size, off_t off);
extern void disk_write (fuse_req_t req, fuse_ino_t ino, const char *buf,
                        size_t size, off_t off, struct fuse_file_info *fi);
extern void disk_fallocate (fuse_req_t req, fuse_ino_t ino, int mode,
                            off_t off, off_t length,
                            struct fuse_file_info *fi);
/* Reply to flush or fsync, flushing the engine first if flush. */
extern void disk_sync (fuse_req_t req, bool flush);

/* statsnode.c: the statistics file, a JSON snapshot taken at open. */
extern off_t statsnode_size (struct dfuse *df);
extern void statsnode_open (fuse_req_t req, struct fuse_file_info *fi);
extern void statsnode_read (fuse_req_t req, size_t size, off_t off,
                            struct fuse_file_info *fi);
extern void statsnode_release (fuse_req_t req, struct fuse_file_info *fi);

#endif /* DISCARDFUSE_H */
