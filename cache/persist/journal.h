/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the journal of the pending set (invariant 10), its
 * format in memory only (engine-journal.c does the file and the engine's
 * side), so that tests can cut an image anywhere and the decoder can be
 * fuzzed.
 *
 * The journal sits beside the state file (STATE.journal) and follows
 * one checkpoint of it: a state file, or none (both sets empty).  It
 * holds, in order, every change made to the two sets since that
 * checkpoint, as the extent map's observer saw them (extmap.h): an
 * insert, a remove or a clear, of the pending map or of the known-clean
 * map.  Replaying them in order on the checkpoint rebuilds the sets as
 * they were when the last record was appended.
 *
 * Layout (integers little-endian):
 *   header, JOURNAL_HEADER_SIZE bytes:
 *     0 magic "DCJOURN\0"     8 version (u32)     12 header size (u32)
 *    16 the checkpoint's length in bytes (u64; 0: no state file)
 *    24 the checkpoint's stored CRC-32C (u32; 0 with no state file)
 *    28 record size (u32)    32 the first record's sequence number
 *    40 the engine's granularity        48 the backend's size
 *    56 CRC-32C of bytes 0-55 (u32)     60 reserved, 0 (u32)
 *   then records of JOURNAL_RECORD_SIZE bytes (common/reclog.h framing):
 *     0 map (u8: 0 pending, 1 known clean)  1 op (u8: extmap_observe_op)
 *     2 reserved, 0 (u16)     4 reserved, 0 (u32)
 *     8 sequence number       16 offset      24 length
 *    32 reserved, 0 (u32)    36 CRC-32C of bytes 0-35
 *   and zeros: the file is extended ahead of the records, so that
 *   appending changes no file size (an fdatasync then writes no
 *   metadata).  The first record that is short, torn or out of sequence
 *   ends the journal.
 */
#ifndef DISCARDCACHE_JOURNAL_H
#define DISCARDCACHE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "extmap.h"

#define JOURNAL_VERSION 1
#define JOURNAL_HEADER_SIZE 64
#define JOURNAL_RECORD_SIZE 40

/* Which set a record changes. */
enum journal_map {
  JOURNAL_PENDING = 0,
  JOURNAL_CLEAN = 1,
};

/* The checkpoint a journal follows, and what it was made for. */
struct journal_header {
  uint64_t checkpoint_len;     /* 0: none (both sets empty) */
  uint32_t checkpoint_crc;
  uint64_t first_seq;
  uint64_t granularity;
  uint64_t backend_size;
};

struct journal_record {
  enum journal_map map;
  enum extmap_observe_op op;
  uint64_t seq;
  uint64_t offset;
  uint64_t length;
};

/* Encode h into out. */
extern void journal_header_encode (const struct journal_header *h,
                                   unsigned char out[JOURNAL_HEADER_SIZE])
  __attribute__ ((nonnull (1, 2)));

/* Decode and check the header at the start of image.  0, or -1 with the
 * reason in why.
 */
extern int journal_header_decode (const void *image, size_t len,
                                  struct journal_header *h,
                                  char *why, size_t whylen)
  __attribute__ ((nonnull (1, 3, 4)));

/* Encode r (its seq included) into out. */
extern void journal_record_encode (const struct journal_record *r,
                                   unsigned char out[JOURNAL_RECORD_SIZE])
  __attribute__ ((nonnull (1, 2)));

/* Call fn for each valid record of image (whose header is h), in order,
 * from the first up to the first that is short, torn, out of sequence
 * or names no known map or operation (the end of the journal: never an
 * error).  Stores how many were applied and the offset where the valid
 * records end (either may be NULL).  Returns 0, or fn's first non-zero
 * return.
 */
typedef int (*journal_record_fn) (const struct journal_record *r,
                                  void *opaque);
extern int journal_replay (const void *image, size_t len,
                           const struct journal_header *h,
                           journal_record_fn fn, void *opaque,
                           uint64_t *records, size_t *valid_len)
  __attribute__ ((nonnull (1, 3, 4)));

#endif /* DISCARDCACHE_JOURNAL_H */
