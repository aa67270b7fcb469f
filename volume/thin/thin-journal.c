/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's meta file format, version 3 (see thin-pure.h for
 * the layout): the checkpoint, a list of runs and the reserve, and the
 * journal records, each a run; encoded and decoded in memory so that
 * tests can cut an image anywhere.  Version 2 is read here too; version
 * 1 images are thin-meta-v1.c's, and thin-recover.c picks the reader.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "arith.h"
#include "crc32c.h"
#include "file-header.h"
#include "fileio.h"
#include "grow.h"
#include "le.h"
#include "log.h"
#include "reclog.h"
#include "thin-pure.h"
#include "varint.h"

static const struct file_format format = {
  .magic = "DCTHIN",                    /* and two NULs */
  .what = "thin meta file", .oldest = 1, .version = THIN_VERSION,
};

enum {
  OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HSIZE = 12, OFF_SLOT = 16,
  OFF_SIZE = 24, OFF_BSIZE = 32, OFF_KIND = 40, OFF_DEV = 48, OFF_INO = 56,
  OFF_SEQ = 64, OFF_RUNS = 72, OFF_RAWLEN = 80, OFF_PAYLEN = 88,
  OFF_TIME = 96, OFF_NAMELEN = 104, OFF_CRC = 108, OFF_RESERVE = 112,
};

#define COMPRESSION_LEVEL 3
/* Bytes one run takes in the payload at most (three varints). */
#define RUN_MAX_BYTES (3 * VARINT_MAX_BYTES)

void
thin_record_encode (const struct thin_record *r,
                    unsigned char out[THIN_RECORD_SIZE])
{
  put32 (out, r->type);
  put32 (out + 4, r->count);
  put64 (out + 16, r->logical);
  put32 (out + 24, r->phys);
  reclog_seal (out, THIN_RECORD_SIZE, r->seq);
}

int
thin_record_decode (const unsigned char in[THIN_RECORD_SIZE],
                    struct thin_record *r)
{
  if (!reclog_intact (in, THIN_RECORD_SIZE))
    return -1;
  r->type = get32 (in);
  r->count = get32 (in + 4);
  r->seq = get64 (in + 8);
  r->logical = get64 (in + 16);
  r->phys = get32 (in + 24);
  return r->type >= THIN_REC_MAP && r->type <= THIN_REC_RELEASE &&
         r->count > 0 ? 0 : -1;
}

/* Version 2 knew maps and unmaps only. */
static int
decode_v2 (const unsigned char in[THIN_RECORD_SIZE], struct thin_record *r)
{
  return thin_record_decode (in, r) == 0 && r->type <= THIN_REC_UNMAP ? 0 : -1;
}

/* The payload: three varints a run. */

struct encoder {
  unsigned char *raw;
  size_t len, cap;
  uint64_t lend, pend;              /* where the previous run ended */
  uint64_t runs;
  uint64_t rend;                    /* the previous reserve run's end */
  uint64_t reserve_runs;
};

static uint64_t
zigzag (int64_t v)
{
  return ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
}

static int64_t
unzigzag (uint64_t v)
{
  return (int64_t) (v >> 1) ^ -(int64_t) (v & 1);
}

static int
encoder_room (struct encoder *enc)
{
  if (enc->cap - enc->len < RUN_MAX_BYTES) {
    unsigned char *raw = grow_array (enc->raw, &enc->cap, 1, 65536);

    if (raw == NULL)
      return -1;
    enc->raw = raw;
  }
  return 0;
}

static int
encode_reserve_run (const struct extent *x, void *opaque)
{
  struct encoder *enc = opaque;

  if (encoder_room (enc) == -1)
    return -1;
  enc->len += varint_put (enc->raw + enc->len, x->offset - enc->rend);
  enc->len += varint_put (enc->raw + enc->len, x->length);
  enc->rend = x->offset + x->length;
  enc->reserve_runs++;
  return 0;
}

static int
encode_run (const struct extent *x, void *opaque)
{
  struct encoder *enc = opaque;

  if (encoder_room (enc) == -1)
    return -1;
  enc->len += varint_put (enc->raw + enc->len, x->offset - enc->lend);
  enc->len += varint_put (enc->raw + enc->len, x->length);
  enc->len += varint_put (enc->raw + enc->len,
                          zigzag ((int64_t) x->value - (int64_t) enc->pend));
  enc->lend = x->offset + x->length;
  enc->pend = x->value + x->length;
  enc->runs++;
  return 0;
}

static void
put_header (unsigned char *p, const struct thin_meta_id *id,
            const struct encoder *enc, uint64_t next_seq, uint64_t time,
            size_t namelen, size_t payload_len)
{
  memset (p, 0, THIN_HEADER_SIZE);
  file_prefix_put (p, &format, THIN_HEADER_SIZE);
  put64 (p + OFF_SLOT, id->slot);
  put64 (p + OFF_SIZE, id->size);
  put64 (p + OFF_BSIZE, id->backend_size);
  memcpy (p + OFF_KIND, id->backend.kind, sizeof id->backend.kind);
  put64 (p + OFF_DEV, id->backend.dev);
  put64 (p + OFF_INO, id->backend.ino);
  put64 (p + OFF_SEQ, next_seq);
  put64 (p + OFF_RUNS, enc->runs);
  put64 (p + OFF_RAWLEN, enc->len);
  put64 (p + OFF_PAYLEN, payload_len);
  put64 (p + OFF_TIME, time);
  put32 (p + OFF_NAMELEN, (uint32_t) namelen);
  put64 (p + OFF_RESERVE, enc->reserve_runs);
}

int
thin_checkpoint_encode (const struct thin_meta_id *id,
                        const struct extmap *runs,
                        const struct extmap *reserve, uint64_t next_seq,
                        uint64_t time, void **image, size_t *len)
{
  size_t namelen = strnlen (id->backend.name, sizeof id->backend.name - 1);
  struct encoder enc = { .raw = NULL };
  unsigned char *img = NULL;
  size_t bound, r;

  if (extmap_iterate (runs, 0, encode_run, &enc) != 0 ||
      (reserve && extmap_iterate (reserve, 0, encode_reserve_run, &enc) != 0))
    goto nomem;
  bound = ZSTD_compressBound (enc.len);
  img = malloc (THIN_HEADER_SIZE + namelen + bound);
  if (img == NULL)
    goto nomem;
  memcpy (img + THIN_HEADER_SIZE, id->backend.name, namelen);
  r = ZSTD_compress (img + THIN_HEADER_SIZE + namelen, bound, enc.raw,
                     enc.len, COMPRESSION_LEVEL);
  if (ZSTD_isError (r)) {
    dc_error ("thin: zstd compression failed: %s", ZSTD_getErrorName (r));
    free (enc.raw);
    free (img);
    errno = EIO;
    return -1;
  }
  *len = THIN_HEADER_SIZE + namelen + r;
  put_header (img, id, &enc, next_seq, time, namelen, r);
  put32 (img + OFF_CRC, file_frame_crc (img, *len, OFF_CRC));
  free (enc.raw);
  *image = img;
  return 0;

 nomem:
  free (enc.raw);
  free (img);
  dc_error ("thin: out of memory for a checkpoint");
  errno = ENOMEM;
  return -1;
}

int
thin_check_identity (const unsigned char *p, const char *name, size_t namelen,
                     const struct thin_meta_id *id, char *why, size_t whylen)
{
  char kind[sizeof id->backend.kind];
  struct file_backend was = {
    .kind = kind, .dev = get64 (p + OFF_DEV), .ino = get64 (p + OFF_INO),
    .name = name, .namelen = namelen,
  };
  struct file_backend now = {
    .kind = id->backend.kind, .dev = id->backend.dev,
    .ino = id->backend.ino, .name = id->backend.name,
    .namelen = strlen (id->backend.name),
  };

  if (get64 (p + OFF_SLOT) != id->slot || get64 (p + OFF_SIZE) != id->size)
    return fileio_fail (why, whylen,
                        "it was created with slot=%" PRIu64 " size=%" PRIu64
                        ", not slot=%" PRIu64 " size=%" PRIu64,
                        get64 (p + OFF_SLOT), get64 (p + OFF_SIZE), id->slot,
                        id->size);
  memcpy (kind, p + OFF_KIND, sizeof kind - 1);
  kind[sizeof kind - 1] = '\0';
  if (file_same_backend (&was, &now, why, whylen) == -1)
    return -1;
  if (get64 (p + OFF_BSIZE) != id->backend_size)
    return fileio_fail (why, whylen,
                        "the backend was %" PRIu64 " bytes when it was "
                        "created, it is %" PRIu64 " now",
                        get64 (p + OFF_BSIZE), id->backend_size);
  return 0;
}

/* Decode the runs of a decompressed payload into m. */
static int
load_runs (const unsigned char **posp, const unsigned char *end,
           uint64_t runs, struct thin_map *m, char *why, size_t whylen)
{
  const unsigned char *pos = *posp;
  uint64_t lend = 0, pend = 0;

  for (uint64_t i = 0; i < runs; i++) {
    uint64_t gap, n, zz, l;
    int64_t p;

    if (varint_get (&pos, end, &gap) == -1 || varint_get (&pos, end, &n) == -1 ||
        varint_get (&pos, end, &zz) == -1)
      return fileio_fail (why, whylen,
                          "the checkpoint's run %" PRIu64 " is cut short",
                          i);
    p = (int64_t) pend + unzigzag (zz);
    if (ADD_OVERFLOW (lend, gap, &l) || p < 0 || p > THIN_MAX_PHYS ||
        thin_map_add (m, l, n, (uint32_t) p) == -1)
      return fileio_fail (why, whylen,
                          "the checkpoint's run %" PRIu64 " is out of "
                          "range or overlaps another",
                          i);
    lend = l + n;
    pend = (uint64_t) p + n;
  }
  *posp = pos;
  return 0;
}

/* Decode the reserve's runs into rec->reserve: each must be free. */
static int
load_reserve (const unsigned char **posp, const unsigned char *end,
              uint64_t runs, struct thin_recovery *rec, char *why,
              size_t whylen)
{
  const unsigned char *pos = *posp;
  uint64_t rend = 0;

  for (uint64_t i = 0; i < runs; i++) {
    uint64_t gap, n, p;
    struct extent x;

    if (varint_get (&pos, end, &gap) == -1 || varint_get (&pos, end, &n) == -1)
      return fileio_fail (why, whylen, "the checkpoint's reserve run %"
                          PRIu64 " is cut short", i);
    if (ADD_OVERFLOW (rend, gap, &p) || n == 0 || p > THIN_MAX_PHYS ||
        n > THIN_MAX_PHYS - p ||
        !extmap_find_overlap (rec->free, p, n, &x) || x.offset > p ||
        x.offset + x.length < p + n ||
        extmap_insert (rec->reserve, p, n, 0) == -1)
      return fileio_fail (why, whylen, "the checkpoint's reserve run %"
                          PRIu64 " is out of range or not free", i);
    rend = p + n;
  }
  *posp = pos;
  return 0;
}

/* Check and load the checkpoint at the start of image into m. */
static int
load_checkpoint (const unsigned char *p, size_t len,
                 const struct thin_meta_id *id, struct thin_map *m,
                 struct thin_recovery *rec, char *why, size_t whylen)
{
  static const struct file_frame_layout v3 = {
    .what = "the checkpoint", .hsize = THIN_HEADER_SIZE,
    .off_namelen = OFF_NAMELEN, .off_paylen = OFF_PAYLEN, .off_crc = OFF_CRC,
    .name_max = sizeof id->backend.name,
  }, v2 = {
    .what = "the checkpoint", .hsize = THIN_V2_HEADER_SIZE,
    .off_namelen = OFF_NAMELEN, .off_paylen = OFF_PAYLEN, .off_crc = OFF_CRC,
    .name_max = sizeof id->backend.name,
  };
  const struct file_frame_layout *layout = rec->version == 2 ? &v2 : &v3;
  uint64_t paylen, rawlen, runs, reserve_runs = 0;
  const unsigned char *pos = NULL;
  size_t hsize = layout->hsize;
  size_t namelen, end;
  struct file_frame f;
  unsigned char *raw;
  size_t r;
  int ret;

  if (file_frame_check (p, len, layout, &f, why, whylen) == -1)
    return -1;
  namelen = f.namelen;
  paylen = f.paylen;
  end = f.end;
  rawlen = get64 (p + OFF_RAWLEN);
  runs = get64 (p + OFF_RUNS);
  if (hsize > OFF_RESERVE)
    reserve_runs = get64 (p + OFF_RESERVE);
  if (thin_check_identity (p, (const char *) p + hsize, namelen,
                           id, why, whylen) == -1)
    return -1;
  if (runs > m->nlogical || runs > m->nphys || reserve_runs > m->nphys ||
      rawlen > (runs + reserve_runs) * RUN_MAX_BYTES)
    return fileio_fail (why, whylen,
                        "the checkpoint's %" PRIu64 " runs in %" PRIu64
                        " bytes cannot be",
                        runs, rawlen);
  raw = malloc (rawlen + 1);
  if (raw == NULL)
    return fileio_fail (why, whylen, "out of memory");
  r = ZSTD_decompress (raw, rawlen, p + hsize + namelen, paylen);
  pos = raw;
  if (ZSTD_isError (r) || r != rawlen)
    ret = fileio_fail (why, whylen,
                       "the checkpoint does not decompress to its runs");
  else
    ret = load_runs (&pos, raw + rawlen, runs, m, why, whylen);
  if (ret == 0 && (rec->free = thin_map_free_set (m)) == NULL)
    ret = fileio_fail (why, whylen,
                       errno == ENOMEM
                           ? "out of memory"
                           : "the checkpoint maps a physical slot twice");
  if (ret == 0)
    ret = load_reserve (&pos, raw + rawlen, reserve_runs, rec, why, whylen);
  if (ret == 0 && pos != raw + rawlen)
    ret = fileio_fail (why, whylen, "the checkpoint has bytes after its runs");
  free (raw);
  if (ret == -1)
    return -1;
  rec->next_seq = get64 (p + OFF_SEQ);
  rec->checkpoint_time = get64 (p + OFF_TIME);
  rec->checkpoint_len = end;
  return 0;
}

static const char *
record_name (uint32_t type)
{
  switch (type) {
  case THIN_REC_MAP: return "map";
  case THIN_REC_UNMAP: return "unmap";
  case THIN_REC_KEEP: return "keep";
  default: return "release";
  }
}

/* One record against the map, the free set and the reserve: a run
 * mapped leaves the reserve, a kept one joins it, a released one leaves
 * it (and must have been in it).
 */
static int
replay_record (const struct thin_record *r, struct thin_map *m,
               struct thin_recovery *rec)
{
  struct extent x;

  switch (r->type) {
  case THIN_REC_MAP:
    if (thin_map_replay_map (m, rec->free, r->logical, r->count,
                             r->phys) == -1)
      return -1;
    return extmap_remove (rec->reserve, r->phys, r->count, NULL);
  case THIN_REC_UNMAP:
    return thin_map_replay_unmap (m, rec->free, r->logical, r->count,
                                  r->phys);
  case THIN_REC_KEEP:
    if (thin_map_replay_unmap (m, rec->free, r->logical, r->count,
                               r->phys) == -1)
      return -1;
    return extmap_insert (rec->reserve, r->phys, r->count, 0);
  default:
    if (r->logical != 0 ||
        !extmap_find_overlap (rec->reserve, r->phys, r->count, &x) ||
        x.offset > r->phys || x.offset + x.length < (uint64_t) r->phys + r->count) {
      errno = EINVAL;
      return -1;
    }
    return extmap_remove (rec->reserve, r->phys, r->count, NULL);
  }
}

/* Apply records until the first that does not check out: a torn tail
 * (short, bad checksum, out of sequence) ends the journal; a record that
 * checks out but contradicts the map means the file is corrupt.
 */
int
thin_replay_records (const unsigned char *p, size_t len, size_t off,
                     size_t record_size,
                     int (*decode) (const unsigned char *, struct thin_record *),
                     struct thin_map *m, struct thin_recovery *rec,
                     char *why, size_t whylen)
{
  for (; !reclog_ends_at (p, len, off, record_size, rec->next_seq);
       off += record_size) {
    struct thin_record r;
    int bad;

    if (decode (p + off, &r) == -1)
      break;
    bad = replay_record (&r, m, rec);
    if (bad)
      return fileio_fail (why, whylen,
                          "journal record %" PRIu64 " (%s logical "
                          "slots %" PRIu64 "+%" PRIu32 ", physical %" PRIu32
                          ") %s",
                          r.seq, record_name (r.type),
                          r.logical, r.count, r.phys,
                          errno == ENOMEM ? "cannot be replayed: out of memory"
                                          : "contradicts the map");
    rec->next_seq++;
    rec->records++;
  }
  rec->valid_len = off;
  return 0;
}

int
thin_meta_version (const void *image, size_t len, uint32_t *version,
                   char *why, size_t whylen)
{
  return file_prefix_get (image, len, &format, version, why, whylen);
}

int
thin_meta_recover_v3 (const unsigned char *p, size_t len,
                      const struct thin_meta_id *id, struct thin_map *m,
                      struct thin_recovery *rec, char *why, size_t whylen)
{
  if (load_checkpoint (p, len, id, m, rec, why, whylen) == -1)
    return -1;
  return thin_replay_records (p, len, rec->checkpoint_len, THIN_RECORD_SIZE,
                              rec->version == 2 ? decode_v2
                                                : thin_record_decode,
                              m, rec, why, whylen);
}
