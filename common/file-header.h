/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the codec and checks the on-disk formats share (the
 * state file and the journal, cache/persist/; thin mode's meta file,
 * volume/thin/thin-journal.c and thin-meta-v1.c): the prefix every
 * header opens with, the frame of a header, a name and a payload under
 * one CRC-32C, and whether the file was saved for this backend.  Each
 * check fails with one sentence in why[whylen] (fileio_fail) and
 * returns -1; the caller reports it once.
 */
#ifndef DISCARDCACHE_FILE_HEADER_H
#define DISCARDCACHE_FILE_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every header opens with this prefix: an 8-byte magic (NUL padded),
 * then the format version and the header's size, 32 bits each, at 8
 * and 12.
 */
#define FILE_PREFIX_SIZE 16

/* A format, as its prefix names it. */
struct file_format {
  char magic[8];                /* "DCSTATE" and its NUL */
  const char *what;             /* "state file": "not a discardcache ..." */
  uint32_t oldest, version;     /* the versions read; version is written */
};

/* Write the prefix of a header of hsize bytes, at f->version. */
extern void file_prefix_put (unsigned char *p, const struct file_format *f,
                             uint32_t hsize);

/* Check that p[len] opens with f's magic and a version from f->oldest
 * to f->version, stored in *version.  0, or -1 with why, the one
 * message for a version this build does not read.
 */
extern int file_prefix_get (const unsigned char *p, size_t len,
                            const struct file_format *f, uint32_t *version,
                            char *why, size_t whylen);

/* Where a format keeps its frame: a header of hsize bytes whose 32-bit
 * field at offset 12 repeats hsize, then a name of namelen bytes (32
 * bits at off_namelen, less than name_max), then a payload of paylen
 * bytes (64 bits at off_paylen); a CRC-32C over all of it, the 32-bit
 * field at off_crc taken as 0.  With whole, the frame is the whole
 * image; else more (a journal) may follow.
 */
struct file_frame_layout {
  const char *what;             /* "the state file", "the checkpoint" */
  size_t hsize;
  size_t off_namelen, off_paylen, off_crc;
  size_t name_max;
  bool whole;
};

/* A checked frame: the name at hsize, the payload after it, the frame
 * ending at end.
 */
struct file_frame {
  size_t namelen;
  uint64_t paylen;
  size_t end;
};

/* The CRC-32C of the first len bytes of p, the 4-byte field at off_crc
 * taken as 0 (how every format stores its checksum in what it covers).
 */
extern uint32_t file_frame_crc (const unsigned char *p, size_t len,
                                size_t off_crc);

/* Check the frame of the image p[len] (its magic and version already
 * checked by the caller) and fill *f.  0, or -1 with why.
 */
extern int file_frame_check (const unsigned char *p, size_t len,
                             const struct file_frame_layout *l,
                             struct file_frame *f, char *why, size_t whylen);

/* A backend as a file names it: its kind ("file", "blkdev", "nbd"), a
 * device and inode when it has them (both 0 otherwise), and its path or
 * URI (namelen bytes, not necessarily NUL-terminated).
 */
struct file_backend {
  const char *kind;
  uint64_t dev, ino;
  const char *name;
  size_t namelen;
};

/* Whether the file, saved for backend was, belongs to backend now: the
 * same kind and the same device and inode, or, without those, the same
 * name.  0, or -1 with why.
 */
extern int file_same_backend (const struct file_backend *was,
                              const struct file_backend *now,
                              char *why, size_t whylen);

#endif /* DISCARDCACHE_FILE_HEADER_H */
