/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the state file's format, in memory only (engine-state.c
 * does the files), so the decoder can be fuzzed on a buffer.
 *
 * Layout (integers little-endian):
 *   header, STATE_HEADER_SIZE bytes (version 2; version 1 ends at 112):
 *     0 magic "DCSTATE\0"     8 version (u32)     12 header size (u32)
 *    16 kind (char[8])       24 dev (u64)        32 inode (u64)
 *    40 backend size         48 granularity      56 mtime in ns (files)
 *    64 extent count         72 bytes they cover 80 unit shift (u32)
 *    84 name length (u32)    88 payload size before compression
 *    96 payload size after compression
 *   104 CRC-32C of the whole file, this field taken as 0 (u32)
 *   108 reserved, 0 (u32)
 *   version 2 only:
 *   112 known-clean extent count  120 bytes they cover
 *   128 their unit shift (u32)    132 reserved, 0 (u32)
 *   the backend's name (path or URI), name length bytes, no NUL
 *   payload: one zstd frame of two lists, the pending extents (extent
 *   count of them) and then the known-clean ones (invariant 9): per
 *   extent in address order, two LEB128 varints, the gap from the end of
 *   the previous extent of its list (from 0 for the first) and the
 *   length, both in units of 2^shift bytes (each list its own shift).
 * Version 1 files (pending extents only) still load.
 */
#ifndef DISCARDCACHE_STATE_H
#define DISCARDCACHE_STATE_H

#include <stddef.h>
#include <stdint.h>

#define STATE_VERSION 2
#define STATE_HEADER_SIZE 136
#define STATE_V1_HEADER_SIZE 112     /* also the smallest header */

/* The two lists a file holds, in this order. */
enum state_list {
  STATE_PENDING,               /* pending discards */
  STATE_CLEAN,                 /* known clean: discarded, not written */
};

/* What a state file is tied to. */
struct state_identity {
  char kind[8];                /* backend kind: "file", "blkdev", "nbd" */
  uint64_t dev;                /* st_dev (file) or st_rdev (blkdev), else 0 */
  uint64_t ino;                /* st_ino (file), else 0 */
  uint64_t size;               /* backend size in bytes */
  uint64_t granularity;        /* the engine's discard granularity */
  uint64_t mtime_ns;           /* a file's modification time, else 0 */
  char name[256];              /* path or URI (NUL-terminated) */
};

struct state_header {
  struct state_identity id;
  uint32_t version;
  uint64_t count;              /* pending extents */
  uint64_t bytes;              /* bytes they cover */
  uint32_t unit_shift;
  uint64_t clean_count;        /* known-clean extents (0 in version 1) */
  uint64_t clean_bytes;
  uint32_t clean_shift;
  uint64_t raw_len;            /* payload before compression */
  uint64_t payload_len;        /* after */
  size_t payload_offset;       /* where the payload starts in the image */
  uint32_t checksum;           /* the stored CRC-32C: the journal's tag */
};

struct state_encoder;

/* Start an image whose pending extents' offsets and lengths are
 * multiples of unit and whose known-clean ones are multiples of
 * clean_unit (powers of two; 1 always works).  NULL with errno on
 * failure.
 */
extern struct state_encoder *state_encoder_new (uint64_t unit,
                                                uint64_t clean_unit);

/* Append [offset, offset+length) to list: every pending extent before
 * the first clean one; within a list in address order, disjoint, length
 * > 0, multiples of the list's unit.  0, or -1 with errno (EINVAL,
 * ENOMEM) reported.
 */
extern int state_encoder_add (struct state_encoder *enc, enum state_list list,
                              uint64_t offset, uint64_t length)
  __attribute__ ((nonnull (1)));

/* Compress and build the whole file for id into *image (malloc'd) of
 * *len bytes.  0, or -1 with errno reported.
 */
extern int state_encoder_finish (struct state_encoder *enc,
                                 const struct state_identity *id,
                                 void **image, size_t *len)
  __attribute__ ((nonnull (1, 2, 3, 4)));

/* Free the encoder (NULL allowed). */
extern void state_encoder_free (struct state_encoder *enc);

/* Check the header and the checksum of image and fill *h.  0, or -1 with
 * the reason in why (not reported: the caller names the file).
 */
extern int state_read_header (const void *image, size_t len,
                              struct state_header *h, char *why, size_t whylen)
  __attribute__ ((nonnull (1, 3, 4)));

/* Whether the file h describes was saved for the backend now describes:
 * kind, size and granularity; dev and inode where the kind has them;
 * the name where it has not; a file's mtime.  0, or -1 with why.
 */
extern int state_check_identity (const struct state_header *h,
                                  const struct state_identity *now,
                                  char *why, size_t whylen)
  __attribute__ ((nonnull (1, 2, 3)));

/* Decode the extents of an image whose header is h.  With fn NULL, only
 * validate every one (order, bounds, counts, trailing data); with fn,
 * call it for each, the pending list and then the clean one, each in
 * address order, stopping at its first non-zero return.  Validate first
 * to apply all or nothing.  0, or -1 with why.
 */
typedef int (*state_extent_fn) (enum state_list list, uint64_t offset,
                                uint64_t length, void *opaque);
extern int state_decode_extents (const void *image, const struct state_header *h,
                                 state_extent_fn fn, void *opaque,
                                 char *why, size_t whylen)
  __attribute__ ((nonnull (1, 2, 5)));

/* The checksum of an image as stored at offset 104 (the field itself
 * counted as 0); len must be at least STATE_V1_HEADER_SIZE.
 */
extern uint32_t state_checksum (const void *image, size_t len)
  __attribute__ ((nonnull (1)));

#endif /* DISCARDCACHE_STATE_H */
