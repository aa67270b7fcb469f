/* SPDX-License-Identifier: BSD-3-Clause */
/* discardfuse: the read-only `stats` file, the engine's statistics as
 * the one JSON object stats_write_json prints (the plugin's statsfile
 * has the same fields).
 *
 * The snapshot is taken at open and kept with the handle, so a reader
 * sees one consistent object however it splits its reads.  The handle
 * is direct_io: every open reaches us (no stale page cache) and reads
 * are not cut at the size getattr reported a moment earlier.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "arith.h"
#include "discardfuse.h"
#include "stats.h"

struct snapshot {
  char *json;
  size_t len;
};

static int
take_snapshot (struct dfuse *df, struct snapshot *snap)
{
  struct volume_stats st;
  FILE *fp;
  int r;

  snap->json = NULL;
  snap->len = 0;
  fp = open_memstream (&snap->json, &snap->len);
  if (fp == NULL)
    return -1;
  volume_get_stats (df->volume, &st);
  r = stats_write_json (&st, fp);
  if (fclose (fp) == EOF || r == -1) {
    free (snap->json);
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

/* For getattr: what an open now would read. */
off_t
statsnode_size (struct dfuse *df)
{
  struct snapshot snap;

  if (take_snapshot (df, &snap) == -1)
    return 0;
  free (snap.json);
  return snap.len;
}

void
statsnode_open (fuse_req_t req, struct fuse_file_info *fi)
{
  struct dfuse *df = fuse_req_userdata (req);
  struct snapshot *snap;

  if ((fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err (req, EACCES);
    return;
  }
  snap = malloc (sizeof *snap);
  if (snap == NULL || take_snapshot (df, snap) == -1) {
    free (snap);
    fuse_reply_err (req, ENOMEM);
    return;
  }
  fi->fh = (uintptr_t) snap;
  fi->direct_io = 1;
  if (fuse_reply_open (req, fi) != 0) {
    /* The open was interrupted: no release will come for it. */
    free (snap->json);
    free (snap);
  }
}

void
statsnode_read (fuse_req_t req, size_t size, off_t off,
                struct fuse_file_info *fi)
{
  const struct snapshot *snap = (const struct snapshot *) (uintptr_t) fi->fh;

  if (off < 0 || (uint64_t) off >= snap->len)
    fuse_reply_buf (req, NULL, 0);
  else
    fuse_reply_buf (req, snap->json + off, MIN (size, snap->len - off));
}

void
statsnode_release (fuse_req_t req, struct fuse_file_info *fi)
{
  struct snapshot *snap = (struct snapshot *) (uintptr_t) fi->fh;

  free (snap->json);
  free (snap);
  fuse_reply_err (req, 0);
}
