/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the state file's format (see state.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "arith.h"
#include "file-header.h"
#include "fileio.h"
#include "grow.h"
#include "le.h"
#include "log.h"
#include "state.h"
#include "verify.h"

static const struct file_format format = {
  .magic = "DCSTATE", .what = "state file",
  .oldest = 1, .version = STATE_VERSION,
};

/* Offsets of the header fields (see state.h). */
enum {
  OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HSIZE = 12, OFF_KIND = 16,
  OFF_DEV = 24, OFF_INO = 32, OFF_SIZE = 40, OFF_GRANULARITY = 48,
  OFF_MTIME = 56, OFF_COUNT = 64, OFF_BYTES = 72, OFF_SHIFT = 80,
  OFF_NAMELEN = 84, OFF_RAWLEN = 88, OFF_PAYLEN = 96, OFF_CRC = 104,
  OFF_RESERVED = 108,
  /* Version 2. */
  OFF_CLEAN_COUNT = 112, OFF_CLEAN_BYTES = 120, OFF_CLEAN_SHIFT = 128,
  OFF_RESERVED2 = 132,
};

/* Fast enough for a 1M-extent file and still cheap to set up; the
 * payload is small, so a higher level buys little.
 */
#define COMPRESSION_LEVEL 3
/* Decompression window limit: our frames never need more, and a forged
 * frame cannot make the loader allocate more than this.
 */
#define WINDOW_LOG_MAX 24
#define VARINT_MAX 10

uint32_t
state_checksum (const void *image, size_t len)
{
  return file_frame_crc (image, len, OFF_CRC);
}

/* Encoding. */

struct state_encoder {
  unsigned shift[2];            /* by enum state_list */
  enum state_list list;         /* the list being appended to */
  uint64_t prev_end;
  uint64_t count[2];
  uint64_t bytes[2];
  unsigned char *raw;
  size_t len;
  size_t cap;
};

struct state_encoder *
state_encoder_new (uint64_t unit, uint64_t clean_unit)
{
  struct state_encoder *enc;

  if (!is_power_of_2 (unit) || !is_power_of_2 (clean_unit)) {
    dc_error ("state: unit %" PRIu64 " or %" PRIu64 " is not a power of two",
              unit, clean_unit);
    errno = EINVAL;
    return NULL;
  }
  enc = calloc (1, sizeof *enc);
  if (enc == NULL) {
    dc_error ("state: out of memory");
    return NULL;
  }
  enc->shift[STATE_PENDING] = __builtin_ctzll (unit);
  enc->shift[STATE_CLEAN] = __builtin_ctzll (clean_unit);
  return enc;
}

static int
put_varint (struct state_encoder *enc, uint64_t v)
{
  if (enc->cap - enc->len < VARINT_MAX) {
    unsigned char *raw = grow_array (enc->raw, &enc->cap, 1, 65536);

    if (raw == NULL) {
      dc_error ("state: out of memory growing the %zu-byte encoder buffer",
                enc->cap);
      return -1;
    }
    enc->raw = raw;
  }
  do {
    enc->raw[enc->len++] = (v & 0x7f) | (v > 0x7f ? 0x80 : 0);
    v >>= 7;
  } while (v);
  return 0;
}

int
state_encoder_add (struct state_encoder *enc, enum state_list list,
                   uint64_t offset, uint64_t length)
{
  unsigned shift = enc->shift[list == STATE_CLEAN];
  uint64_t mask = (UINT64_C (1) << shift) - 1;

  if (list < enc->list || (list != STATE_PENDING && list != STATE_CLEAN)) {
    dc_error ("state: a pending extent after the known-clean ones");
    errno = EINVAL;
    return -1;
  }
  if (list != enc->list) {
    enc->list = list;
    enc->prev_end = 0;
  }
  if (length == 0 || offset < enc->prev_end || ((offset | length) & mask) ||
      offset + length < offset) {
    dc_error ("state: extent [%" PRIu64 ", +%" PRIu64 ") is out of order, "
              "empty or not a multiple of the unit", offset, length);
    errno = EINVAL;
    return -1;
  }
  if (put_varint (enc, (offset - enc->prev_end) >> shift) == -1 ||
      put_varint (enc, length >> shift) == -1)
    return -1;
  enc->prev_end = offset + length;
  enc->count[list]++;
  enc->bytes[list] += length;
  return 0;
}

static void
put_header (unsigned char *img, const struct state_encoder *enc,
            const struct state_identity *id, size_t namelen,
            size_t payload_len)
{
  memset (img, 0, STATE_HEADER_SIZE);
  file_prefix_put (img, &format, STATE_HEADER_SIZE);
  memcpy (img + OFF_KIND, id->kind, strnlen (id->kind, sizeof id->kind - 1));
  put64 (img + OFF_DEV, id->dev);
  put64 (img + OFF_INO, id->ino);
  put64 (img + OFF_SIZE, id->size);
  put64 (img + OFF_GRANULARITY, id->granularity);
  put64 (img + OFF_MTIME, id->mtime_ns);
  put64 (img + OFF_COUNT, enc->count[STATE_PENDING]);
  put64 (img + OFF_BYTES, enc->bytes[STATE_PENDING]);
  put32 (img + OFF_SHIFT, enc->shift[STATE_PENDING]);
  put32 (img + OFF_NAMELEN, namelen);
  put64 (img + OFF_RAWLEN, enc->len);
  put64 (img + OFF_PAYLEN, payload_len);
  put64 (img + OFF_CLEAN_COUNT, enc->count[STATE_CLEAN]);
  put64 (img + OFF_CLEAN_BYTES, enc->bytes[STATE_CLEAN]);
  put32 (img + OFF_CLEAN_SHIFT, enc->shift[STATE_CLEAN]);
}

static int
compress_payload (const struct state_encoder *enc, void *dst, size_t cap,
                  size_t *out)
{
  ZSTD_CCtx *cctx = ZSTD_createCCtx ();
  size_t r;

  if (cctx == NULL) {
    dc_error ("state: out of memory for zstd");
    errno = ENOMEM;
    return -1;
  }
  ZSTD_CCtx_setParameter (cctx, ZSTD_c_compressionLevel, COMPRESSION_LEVEL);
  /* zstd's own checksum of the decompressed bytes, beside our CRC of
   * the file: a decoder bug cannot pass for valid extents.
   */
  ZSTD_CCtx_setParameter (cctx, ZSTD_c_checksumFlag, 1);
  r = ZSTD_compress2 (cctx, dst, cap, enc->raw ? enc->raw : (void *) "",
                      enc->len);
  ZSTD_freeCCtx (cctx);
  if (ZSTD_isError (r)) {
    dc_error ("state: zstd compression failed: %s", ZSTD_getErrorName (r));
    errno = EIO;
    return -1;
  }
  *out = r;
  return 0;
}

int
state_encoder_finish (struct state_encoder *enc,
                      const struct state_identity *id,
                      void **image, size_t *len)
{
  size_t namelen = strnlen (id->name, sizeof id->name - 1);
  size_t bound = ZSTD_compressBound (enc->len);
  unsigned char *img = malloc (STATE_HEADER_SIZE + namelen + bound);
  size_t payload_len;

  if (img == NULL) {
    dc_error ("state: out of memory");
    return -1;
  }
  memcpy (img + STATE_HEADER_SIZE, id->name, namelen);
  if (compress_payload (enc, img + STATE_HEADER_SIZE + namelen, bound,
                        &payload_len) == -1) {
    free (img);
    return -1;
  }
  *len = STATE_HEADER_SIZE + namelen + payload_len;
  put_header (img, enc, id, namelen, payload_len);
  put32 (img + OFF_CRC, state_checksum (img, *len));
  *image = img;
  return 0;
}

void
state_encoder_free (struct state_encoder *enc)
{
  if (enc) {
    free (enc->raw);
    free (enc);
  }
}

/* Decoding. */

static void
get_identity (const unsigned char *p, size_t hsize, size_t namelen,
              struct state_identity *id)
{
  memset (id, 0, sizeof *id);
  memcpy (id->kind, p + OFF_KIND, sizeof id->kind - 1);
  id->dev = get64 (p + OFF_DEV);
  id->ino = get64 (p + OFF_INO);
  id->size = get64 (p + OFF_SIZE);
  id->granularity = get64 (p + OFF_GRANULARITY);
  id->mtime_ns = get64 (p + OFF_MTIME);
  memcpy (id->name, p + hsize, namelen);
}

/* Version 2's known-clean fields, 0 in version 1.  0, or -1 if corrupt. */
static int
get_clean_fields (const unsigned char *p, uint32_t version,
                  struct state_header *h)
{
  h->clean_count = h->clean_bytes = 0;
  h->clean_shift = 0;
  if (version == 1)
    return 0;
  h->clean_count = get64 (p + OFF_CLEAN_COUNT);
  h->clean_bytes = get64 (p + OFF_CLEAN_BYTES);
  h->clean_shift = get32 (p + OFF_CLEAN_SHIFT);
  return h->clean_shift > 62 || get32 (p + OFF_RESERVED2) != 0 ? -1 : 0;
}

int
state_read_header (const void *image, size_t len, struct state_header *h,
                   char *why, size_t whylen)
{
  const unsigned char *p = image;
  struct file_frame_layout l = {
    .what = "the state file", .off_namelen = OFF_NAMELEN,
    .off_paylen = OFF_PAYLEN, .off_crc = OFF_CRC,
    .name_max = sizeof h->id.name, .whole = true,
  };
  struct file_frame f;
  uint32_t version;

  if (file_prefix_get (p, len, &format, &version, why, whylen) == -1)
    return -1;
  l.hsize = version == 1 ? STATE_V1_HEADER_SIZE : STATE_HEADER_SIZE;
  if (file_frame_check (p, len, &l, &f, why, whylen) == -1)
    return -1;
  if (p[OFF_KIND + 7] != 0 || get32 (p + OFF_SHIFT) > 62 ||
      get32 (p + OFF_RESERVED) != 0 || get_clean_fields (p, version, h) == -1)
    return fileio_fail (why, whylen, "the state file has a corrupt header");
  get_identity (p, l.hsize, f.namelen, &h->id);
  h->version = version;
  h->count = get64 (p + OFF_COUNT);
  h->bytes = get64 (p + OFF_BYTES);
  h->unit_shift = get32 (p + OFF_SHIFT);
  h->raw_len = get64 (p + OFF_RAWLEN);
  h->payload_len = f.paylen;
  h->payload_offset = l.hsize + f.namelen;
  h->checksum = get32 (p + OFF_CRC);
  return 0;
}

int
state_check_identity (const struct state_header *h,
                      const struct state_identity *now,
                      char *why, size_t whylen)
{
  const struct state_identity *was = &h->id;
  struct file_backend a = {
    .kind = was->kind, .dev = was->dev, .ino = was->ino, .name = was->name,
    .namelen = strlen (was->name),
  };
  struct file_backend b = {
    .kind = now->kind, .dev = now->dev, .ino = now->ino, .name = now->name,
    .namelen = strlen (now->name),
  };

  if (file_same_backend (&a, &b, why, whylen) == -1)
    return -1;
  if (was->size != now->size)
    return fileio_fail (why, whylen,
                        "saved for a backend of %" PRIu64 " bytes, "
                        "this one has %" PRIu64,
                        was->size, now->size);
  if (was->granularity != now->granularity)
    return fileio_fail (why, whylen,
                        "saved with granularity %" PRIu64 ", now %" PRIu64,
                        was->granularity, now->granularity);
  if (was->mtime_ns != now->mtime_ns)
    return fileio_fail (why, whylen,
                        "the backend file was modified after the state "
                        "was saved (mtime %" PRIu64 " ns, now %" PRIu64 " ns)",
                        was->mtime_ns, now->mtime_ns);
  return 0;
}

/* The payload, decompressed as a stream into a small window, so a file
 * declaring millions of extents needs no large allocation.
 */
struct reader {
  ZSTD_DCtx *dctx;
  ZSTD_inBuffer in;
  bool frame_done;
  size_t pos;
  size_t end;
  uint64_t total;
  const char *error;
  unsigned char out[65536];
};

/* 1: a byte is in out[pos]; 0: the frame ended; -1: r->error. */
static int
reader_fill (struct reader *r)
{
  while (r->pos == r->end) {
    ZSTD_outBuffer o = { r->out, sizeof r->out, 0 };
    size_t in_before = r->in.pos;
    size_t rc;

    if (r->frame_done)
      return 0;
    rc = ZSTD_decompressStream (r->dctx, &o, &r->in);
    if (ZSTD_isError (rc)) {
      r->error = ZSTD_getErrorName (rc);
      return -1;
    }
    if (rc == 0)
      r->frame_done = true;
    else if (o.pos == 0 && r->in.pos == in_before) {
      r->error = "the compressed payload ends early";
      return -1;
    }
    r->pos = 0;
    r->end = o.pos;
    r->total += o.pos;
  }
  return 1;
}

/* 1 with *v, 0 at a clean end, -1 with r->error. */
static int
read_varint (struct reader *r, uint64_t *v)
{
  uint64_t x = 0;

  for (int shift = 0; shift < 64; shift += 7) {
    int rc = reader_fill (r);
    unsigned char b;

    if (rc <= 0) {
      if (rc == 0 && shift > 0)
        r->error = "the payload ends inside a number";
      return rc == 0 && shift == 0 ? 0 : -1;
    }
    b = r->out[r->pos++];
    if (shift == 63 && b > 1)
      break;
    x |= (uint64_t) (b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 1;
    }
  }
  r->error = "a number in the payload overflows 64 bits";
  return -1;
}

/* One extent in units of 2^shift: 1 with offset and length, 0 at the
 * end, -1 with why.
 */
static int
next_extent (struct reader *r, const struct state_header *h, unsigned shift,
             uint64_t prev_end, uint64_t *offset, uint64_t *length,
             char *why, size_t whylen)
{
  uint64_t gap, len, end;
  int rc = read_varint (r, &gap);

  if (rc == 0)
    return 0;
  if (rc == 1 && (rc = read_varint (r, &len)) == 0) {
    r->error = "the payload ends inside an extent";
    rc = -1;
  }
  if (rc == -1)
    return fileio_fail (why, whylen, "corrupt payload: %s", r->error);
  if (len == 0 || gap > (UINT64_MAX >> shift) || len > (UINT64_MAX >> shift))
    return fileio_fail (why, whylen,
                        "corrupt payload: an extent is empty or too long");
  gap <<= shift;
  len <<= shift;
  if (ADD_OVERFLOW (prev_end, gap, offset) || ADD_OVERFLOW (*offset, len, &end) ||
      end > h->id.size)
    return fileio_fail (why, whylen,
                        "corrupt payload: an extent ends beyond the "
                        "backend's %" PRIu64 " bytes",
                        h->id.size);
  /* What the engine applies without looking again: in address order,
   * within the backend (invariant 4).
   */
  VERIFY3U (*offset, >=, prev_end);
  VERIFY3U (end, <=, h->id.size);
  *length = len;
  return 1;
}

/* The pending list (h->count extents), then the clean list to the end
 * of the payload, each from offset 0.
 */
static int
decode (struct reader *r, const struct state_header *h, state_extent_fn fn,
        void *opaque, char *why, size_t whylen)
{
  const uint64_t want[2] = { h->count, h->clean_count };
  const uint64_t want_bytes[2] = { h->bytes, h->clean_bytes };
  const unsigned shift[2] = { h->unit_shift, h->clean_shift };
  uint64_t prev_end = 0, n[2] = { 0, 0 }, bytes[2] = { 0, 0 };
  uint64_t offset = 0, length = 0;
  enum state_list list = STATE_PENDING;
  int rc;

  for (;;) {
    if (list == STATE_PENDING && n[list] == want[list]) {
      list = STATE_CLEAN;
      prev_end = 0;
    }
    rc = next_extent (r, h, shift[list], prev_end, &offset, &length, why,
                      whylen);
    if (rc != 1)
      break;
    if (++n[list] > want[list])
      return fileio_fail (why, whylen,
                          "corrupt payload: more than the %" PRIu64
                          " %s extents the header declares",
                          want[list],
                          list == STATE_CLEAN ? "known-clean" : "pending");
    if (fn && fn (list, offset, length, opaque) != 0)
      return fileio_fail (why, whylen, "could not apply an extent");
    prev_end = offset + length;
    bytes[list] += length;
  }
  if (rc == -1)
    return -1;
  for (int i = 0; i < 2; i++)
    if (n[i] != want[i] || bytes[i] != want_bytes[i])
      return fileio_fail (why, whylen,
                          "corrupt payload: %" PRIu64 " %s extents of %" PRIu64
                          " bytes, the header says %" PRIu64 " of %" PRIu64,
                          n[i], i == STATE_CLEAN ? "known-clean" : "pending",
                          bytes[i], want[i], want_bytes[i]);
  if (r->total != h->raw_len)
    return fileio_fail (why, whylen,
                        "corrupt payload: %" PRIu64 " bytes, the header "
                        "says %" PRIu64,
                        r->total, h->raw_len);
  if (r->in.pos != r->in.size)
    return fileio_fail (why, whylen,
                        "corrupt payload: data after the compressed frame");
  return 0;
}

int
state_decode_extents (const void *image, const struct state_header *h,
                      state_extent_fn fn, void *opaque, char *why, size_t whylen)
{
  /* Not calloc: the 64 KiB window needs no zeroing (the fuzz target
   * spent a few percent clearing it).
   */
  struct reader *r = malloc (sizeof *r);
  int ret;

  if (r == NULL)
    return fileio_fail (why, whylen, "out of memory");
  memset (r, 0, offsetof (struct reader, out));
  if ((r->dctx = ZSTD_createDCtx ()) == NULL) {
    free (r);
    return fileio_fail (why, whylen, "out of memory");
  }
  ZSTD_DCtx_setParameter (r->dctx, ZSTD_d_windowLogMax, WINDOW_LOG_MAX);
  r->in.src = (const unsigned char *) image + h->payload_offset;
  r->in.size = h->payload_len;
  ret = decode (r, h, fn, opaque, why, whylen);
  ZSTD_freeDCtx (r->dctx);
  free (r);
  return ret;
}
