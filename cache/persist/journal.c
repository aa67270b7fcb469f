/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the journal of the pending set, its format (see
 * journal.h).
 */
#include <config.h>

#include <stdbool.h>
#include <string.h>

#include "arith.h"
#include "crc32c.h"
#include "file-header.h"
#include "fileio.h"
#include "journal.h"
#include "le.h"
#include "reclog.h"
#include "verify.h"

static const struct file_format format = {
  .magic = "DCJOURN", .what = "journal",
  .oldest = JOURNAL_VERSION, .version = JOURNAL_VERSION,
};

enum {
  OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HSIZE = 12, OFF_CKLEN = 16,
  OFF_CKCRC = 24, OFF_RSIZE = 28, OFF_FIRST = 32, OFF_GRAN = 40,
  OFF_SIZE = 48, OFF_HCRC = 56, OFF_HRESERVED = 60,
};

enum {
  REC_MAP = 0, REC_OP = 1, REC_RESERVED = 2, REC_RESERVED2 = 4,
  REC_OFFSET = 16, REC_LENGTH = 24, REC_RESERVED3 = 32,
};

void
journal_header_encode (const struct journal_header *h,
                       unsigned char out[JOURNAL_HEADER_SIZE])
{
  memset (out, 0, JOURNAL_HEADER_SIZE);
  file_prefix_put (out, &format, JOURNAL_HEADER_SIZE);
  put64 (out + OFF_CKLEN, h->checkpoint_len);
  put32 (out + OFF_CKCRC, h->checkpoint_crc);
  put32 (out + OFF_RSIZE, JOURNAL_RECORD_SIZE);
  put64 (out + OFF_FIRST, h->first_seq);
  put64 (out + OFF_GRAN, h->granularity);
  put64 (out + OFF_SIZE, h->backend_size);
  put32 (out + OFF_HCRC, crc32c (0, out, OFF_HCRC));
}

int
journal_header_decode (const void *image, size_t len, struct journal_header *h,
                       char *why, size_t whylen)
{
  const unsigned char *p = image;
  uint32_t version;

  if (file_prefix_get (p, len, &format, &version, why, whylen) == -1)
    return -1;
  if (len < JOURNAL_HEADER_SIZE)
    return fileio_fail (why, whylen, "its header is truncated");
  if (get32 (p + OFF_HCRC) != crc32c (0, p, OFF_HCRC))
    return fileio_fail (why, whylen, "its header is corrupt (checksum)");
  if (get32 (p + OFF_HSIZE) != JOURNAL_HEADER_SIZE ||
      get32 (p + OFF_RSIZE) != JOURNAL_RECORD_SIZE ||
      get32 (p + OFF_HRESERVED) != 0)
    return fileio_fail (why, whylen, "corrupt header");
  h->checkpoint_len = get64 (p + OFF_CKLEN);
  h->checkpoint_crc = get32 (p + OFF_CKCRC);
  h->first_seq = get64 (p + OFF_FIRST);
  h->granularity = get64 (p + OFF_GRAN);
  h->backend_size = get64 (p + OFF_SIZE);
  return 0;
}

/* Whether decode_record takes r back: a record it refuses ends the
 * journal there, and every record after it would be lost on replay
 * (invariant 10).
 */
static void
verify_record (const struct journal_record *r)
{
  uint64_t end;
  bool wraps;

  VERIFY (r->map == JOURNAL_PENDING || r->map == JOURNAL_CLEAN);
  VERIFY (r->op >= EXTMAP_OBSERVE_INSERT && r->op <= EXTMAP_OBSERVE_CLEAR);
  if (r->op == EXTMAP_OBSERVE_CLEAR) {
    VERIFY3U (r->offset, ==, 0);
    VERIFY3U (r->length, ==, 0);
    return;
  }
  VERIFY3U (r->length, >, 0);
  wraps = ADD_OVERFLOW (r->offset, r->length, &end);
  VERIFY (!wraps);
  VERIFY3U (end, <=, EXTMAP_MAX_END);
}

void
journal_record_encode (const struct journal_record *r,
                       unsigned char out[JOURNAL_RECORD_SIZE])
{
  verify_record (r);
  memset (out, 0, JOURNAL_RECORD_SIZE);
  out[REC_MAP] = r->map;
  out[REC_OP] = r->op;
  put64 (out + REC_OFFSET, r->offset);
  put64 (out + REC_LENGTH, r->length);
  reclog_seal (out, JOURNAL_RECORD_SIZE, r->seq);
}

/* A record whose checksum holds but that names nothing we know was
 * not written by us: it ends the journal like a torn one.
 */
static bool
decode_record (const unsigned char *in, struct journal_record *r)
{
  uint64_t end;

  if ((in[REC_MAP] != JOURNAL_PENDING && in[REC_MAP] != JOURNAL_CLEAN) ||
      in[REC_OP] < EXTMAP_OBSERVE_INSERT || in[REC_OP] > EXTMAP_OBSERVE_CLEAR ||
      get32 (in + REC_RESERVED) != 0 || get32 (in + REC_RESERVED2) != 0 ||
      get32 (in + REC_RESERVED3) != 0)
    return false;
  r->map = in[REC_MAP];
  r->op = in[REC_OP];
  r->seq = get64 (in + RECLOG_SEQ_OFFSET);
  r->offset = get64 (in + REC_OFFSET);
  r->length = get64 (in + REC_LENGTH);
  if (r->op == EXTMAP_OBSERVE_CLEAR)
    return r->offset == 0 && r->length == 0;
  return r->length > 0 && !ADD_OVERFLOW (r->offset, r->length, &end) &&
         end <= EXTMAP_MAX_END;
}

int
journal_replay (const void *image, size_t len, const struct journal_header *h,
                journal_record_fn fn, void *opaque, uint64_t *records,
                size_t *valid_len)
{
  const unsigned char *p = image;
  uint64_t seq = h->first_seq, n = 0;
  size_t off = JOURNAL_HEADER_SIZE;
  int r = 0;

  for (; !reclog_ends_at (p, len, off, JOURNAL_RECORD_SIZE, seq);
       off += JOURNAL_RECORD_SIZE, seq++, n++) {
    struct journal_record rec;

    if (!decode_record (p + off, &rec))
      break;
    /* The framing's promise: records replay in sequence. */
    VERIFY3U (rec.seq, ==, seq);
    r = fn (&rec, opaque);
    if (r != 0)
      break;
  }
  if (records)
    *records = n;
  if (valid_len)
    *valid_len = off;
  return r;
}
