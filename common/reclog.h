/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the framing of journal records, shared by thin mode's
 * meta journal (volume/thin/thin-journal.c) and the engine's journal of
 * the pending set (cache/persist/journal.c).  A journal is a run of fixed-size
 * records after a header; each record carries its sequence number, a
 * u64 at offset 8, and ends in the CRC-32C of the bytes before that
 * last field.  Records are appended and made durable by fdatasync, so a
 * crash can leave the last append short or torn: the first record that
 * is short, fails its checksum or breaks the sequence ends the journal,
 * and what follows it is never applied.
 */
#ifndef DISCARDCACHE_RECLOG_H
#define DISCARDCACHE_RECLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crc32c.h"
#include "le.h"

#define RECLOG_SEQ_OFFSET 8

/* Write seq and the checksum into rec, whose other fields are set. */
static inline void
reclog_seal (unsigned char *rec, size_t size, uint64_t seq)
{
  put64 (rec + RECLOG_SEQ_OFFSET, seq);
  put32 (rec + size - 4, crc32c (0, rec, size - 4));
}

/* Whether rec's checksum holds. */
static inline bool
reclog_intact (const unsigned char *rec, size_t size)
{
  return get32 (rec + size - 4) == crc32c (0, rec, size - 4);
}

/* Whether the record at off of p[0, len) ends the journal there: short,
 * torn, or not the one numbered seq.
 */
static inline bool
reclog_ends_at (const unsigned char *p, size_t len, size_t off, size_t size,
                uint64_t seq)
{
  return off > len || len - off < size || !reclog_intact (p + off, size) ||
         get64 (p + off + RECLOG_SEQ_OFFSET) != seq;
}

#endif /* DISCARDCACHE_RECLOG_H */
