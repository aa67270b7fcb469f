/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's meta file format (see thin.h for the
 * layout): the checkpoint image and the journal records, encoded and
 * recovered in memory so that tests can cut an image anywhere.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "crc32c.h"
#include "le.h"
#include "log.h"
#include "thin.h"

static const char magic[8] = "DCTHIN";   /* and two NULs */

enum {
  OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HSIZE = 12, OFF_SLOT = 16,
  OFF_SIZE = 24, OFF_BSIZE = 32, OFF_KIND = 40, OFF_DEV = 48, OFF_INO = 56,
  OFF_SEQ = 64, OFF_HW = 72, OFF_NSLOTS = 76, OFF_PAYLEN = 80,
  OFF_TIME = 88, OFF_CRC = 96, OFF_NAMELEN = 100,
};

#define COMPRESSION_LEVEL 3

void
thin_record_encode (const struct thin_record *r,
                    unsigned char out[THIN_RECORD_SIZE])
{
  put32 (out, r->type);
  put32 (out + 4, r->phys);
  put64 (out + 8, r->seq);
  put32 (out + 16, r->logical);
  put32 (out + 20, crc32c (0, out, 20));
}

int
thin_record_decode (const unsigned char in[THIN_RECORD_SIZE],
                    struct thin_record *r)
{
  if (get32 (in + 20) != crc32c (0, in, 20))
    return -1;
  r->type = get32 (in);
  r->phys = get32 (in + 4);
  r->seq = get64 (in + 8);
  r->logical = get32 (in + 16);
  return r->type == THIN_REC_MAP || r->type == THIN_REC_UNMAP ? 0 : -1;
}

/* The checksum of a checkpoint of len bytes, its CRC field taken as 0. */
static uint32_t
checkpoint_crc (const unsigned char *p, size_t len)
{
  static const unsigned char zero[4];
  uint32_t crc = crc32c (0, p, OFF_CRC);

  crc = crc32c (crc, zero, sizeof zero);
  return crc32c (crc, p + OFF_CRC + 4, len - OFF_CRC - 4);
}

/* The map as deltas of (entry + 1) from the previous one, modulo 2^32:
 * runs of consecutive slots and of unmapped ones become runs of one
 * value, which zstd shrinks to almost nothing.
 */
static unsigned char *
delta_encode (const uint32_t *l2p, uint64_t n)
{
  unsigned char *raw = malloc (n * 4 + 1);
  uint32_t prev = 0;

  if (raw == NULL)
    return NULL;
  for (uint64_t i = 0; i < n; i++) {
    put32 (raw + 4 * i, (uint32_t) (l2p[i] + 1 - prev));
    prev = l2p[i] + 1;
  }
  return raw;
}

static void
delta_decode (const unsigned char *raw, uint64_t n, uint32_t *l2p)
{
  uint32_t prev = 0;

  for (uint64_t i = 0; i < n; i++) {
    prev += get32 (raw + 4 * i);
    l2p[i] = prev - 1;
  }
}

static void
put_header (unsigned char *p, const struct thin_meta_id *id, uint64_t nlogical,
            uint64_t next_seq, uint32_t high_water, uint64_t time,
            size_t namelen, size_t payload_len)
{
  memset (p, 0, THIN_HEADER_SIZE);
  memcpy (p + OFF_MAGIC, magic, sizeof magic);
  put32 (p + OFF_VERSION, THIN_VERSION);
  put32 (p + OFF_HSIZE, THIN_HEADER_SIZE);
  put64 (p + OFF_SLOT, id->slot);
  put64 (p + OFF_SIZE, id->size);
  put64 (p + OFF_BSIZE, id->backend_size);
  memcpy (p + OFF_KIND, id->backend.kind, sizeof id->backend.kind);
  put64 (p + OFF_DEV, id->backend.dev);
  put64 (p + OFF_INO, id->backend.ino);
  put64 (p + OFF_SEQ, next_seq);
  put32 (p + OFF_HW, high_water);
  put32 (p + OFF_NSLOTS, (uint32_t) nlogical);
  put64 (p + OFF_PAYLEN, payload_len);
  put64 (p + OFF_TIME, time);
  put32 (p + OFF_NAMELEN, (uint32_t) namelen);
}

int
thin_checkpoint_encode (const struct thin_meta_id *id, const uint32_t *l2p,
                        uint64_t nlogical, uint64_t next_seq,
                        uint32_t high_water, uint64_t time,
                        void **image, size_t *len)
{
  size_t namelen = strnlen (id->backend.name, sizeof id->backend.name - 1);
  size_t bound = ZSTD_compressBound (nlogical * 4);
  unsigned char *raw = delta_encode (l2p, nlogical);
  unsigned char *img = malloc (THIN_HEADER_SIZE + namelen + bound);
  size_t r;

  if (raw == NULL || img == NULL) {
    free (raw);
    free (img);
    dc_error ("thin: out of memory for a checkpoint");
    errno = ENOMEM;
    return -1;
  }
  memcpy (img + THIN_HEADER_SIZE, id->backend.name, namelen);
  r = ZSTD_compress (img + THIN_HEADER_SIZE + namelen, bound, raw,
                     nlogical * 4, COMPRESSION_LEVEL);
  free (raw);
  if (ZSTD_isError (r)) {
    dc_error ("thin: zstd compression failed: %s", ZSTD_getErrorName (r));
    free (img);
    errno = EIO;
    return -1;
  }
  *len = THIN_HEADER_SIZE + namelen + r;
  put_header (img, id, nlogical, next_seq, high_water, time, namelen, r);
  put32 (img + OFF_CRC, checkpoint_crc (img, *len));
  *image = img;
  return 0;
}

/* Whether the header describes id; the reason in why if not. */
static int
check_identity (const unsigned char *p, const struct thin_meta_id *id,
                char *why, size_t whylen)
{
  size_t namelen = get32 (p + OFF_NAMELEN);
  const char *name = (const char *) p + THIN_HEADER_SIZE;
  bool has_inode = id->backend.dev != 0 || id->backend.ino != 0;

  if (get64 (p + OFF_SLOT) != id->slot || get64 (p + OFF_SIZE) != id->size)
    snprintf (why, whylen, "it was created with slot=%" PRIu64 " size=%"
              PRIu64 ", not slot=%" PRIu64 " size=%" PRIu64,
              get64 (p + OFF_SLOT), get64 (p + OFF_SIZE), id->slot, id->size);
  else if (strncmp ((const char *) p + OFF_KIND, id->backend.kind,
                    sizeof id->backend.kind) != 0 ||
           (has_inode && (get64 (p + OFF_DEV) != id->backend.dev ||
                          get64 (p + OFF_INO) != id->backend.ino)) ||
           (!has_inode && (namelen != strlen (id->backend.name) ||
                           memcmp (name, id->backend.name, namelen) != 0)))
    snprintf (why, whylen, "it belongs to another backend (%.*s)",
              (int) namelen, name);
  else if (get64 (p + OFF_BSIZE) != id->backend_size)
    snprintf (why, whylen, "the backend was %" PRIu64 " bytes when it was "
              "created, it is %" PRIu64 " now", get64 (p + OFF_BSIZE),
              id->backend_size);
  else
    return 0;
  return -1;
}

/* Check and load the checkpoint at the start of image into m. */
static int
load_checkpoint (const unsigned char *p, size_t len,
                 const struct thin_meta_id *id, struct thin_map *m,
                 struct thin_recovery *rec, char *why, size_t whylen)
{
  uint64_t paylen, nlogical = m->nlogical;
  size_t namelen, end;
  unsigned char *raw;
  uint32_t *l2p;
  size_t r;
  int ret = -1;

  if (len < THIN_HEADER_SIZE || memcmp (p, magic, sizeof magic) != 0) {
    snprintf (why, whylen, "not a discardcache thin meta file");
    return -1;
  }
  if (get32 (p + OFF_VERSION) != THIN_VERSION ||
      get32 (p + OFF_HSIZE) != THIN_HEADER_SIZE) {
    snprintf (why, whylen, "format version %" PRIu32 ", expected %d",
              get32 (p + OFF_VERSION), THIN_VERSION);
    return -1;
  }
  namelen = get32 (p + OFF_NAMELEN);
  paylen = get64 (p + OFF_PAYLEN);
  if (namelen >= sizeof id->backend.name || paylen > len ||
      THIN_HEADER_SIZE + namelen + paylen > len) {
    snprintf (why, whylen, "the checkpoint is truncated or corrupt");
    return -1;
  }
  end = THIN_HEADER_SIZE + namelen + paylen;
  if (get32 (p + OFF_CRC) != checkpoint_crc (p, end)) {
    snprintf (why, whylen, "the checkpoint is corrupt (checksum mismatch)");
    return -1;
  }
  if (check_identity (p, id, why, whylen) == -1)
    return -1;
  if (get32 (p + OFF_NSLOTS) != (uint32_t) nlogical) {
    snprintf (why, whylen, "the checkpoint has %" PRIu32 " slots, expected %"
              PRIu64, get32 (p + OFF_NSLOTS), nlogical);
    return -1;
  }
  raw = malloc (nlogical * 4 + 1);
  l2p = malloc (nlogical * sizeof *l2p + 1);
  if (raw == NULL || l2p == NULL) {
    snprintf (why, whylen, "out of memory");
    goto out;
  }
  r = ZSTD_decompress (raw, nlogical * 4, p + THIN_HEADER_SIZE + namelen,
                       paylen);
  if (ZSTD_isError (r) || r != nlogical * 4) {
    snprintf (why, whylen, "the checkpoint does not decompress to the map");
    goto out;
  }
  delta_decode (raw, nlogical, l2p);
  if (thin_map_load (m, l2p, get32 (p + OFF_HW)) == -1) {
    snprintf (why, whylen, "the checkpoint maps a slot out of range or twice");
    goto out;
  }
  rec->next_seq = get64 (p + OFF_SEQ);
  rec->checkpoint_time = get64 (p + OFF_TIME);
  rec->checkpoint_len = end;
  ret = 0;
 out:
  free (raw);
  free (l2p);
  return ret;
}

/* Apply records until the first that does not check out: a torn tail
 * (short, bad checksum, out of sequence) ends the journal; a record that
 * checks out but contradicts the map means the file is corrupt.
 */
int
thin_meta_recover (const void *image, size_t len,
                   const struct thin_meta_id *id, struct thin_map *m,
                   struct thin_recovery *rec, char *why, size_t whylen)
{
  const unsigned char *p = image;
  size_t off;

  memset (rec, 0, sizeof *rec);
  if (load_checkpoint (p, len, id, m, rec, why, whylen) == -1)
    return -1;
  for (off = rec->checkpoint_len; off + THIN_RECORD_SIZE <= len;
       off += THIN_RECORD_SIZE) {
    struct thin_record r;
    int bad;

    if (thin_record_decode (p + off, &r) == -1 || r.seq != rec->next_seq)
      break;
    bad = r.type == THIN_REC_MAP ? thin_map_replay_map (m, r.logical, r.phys)
                                 : thin_map_replay_unmap (m, r.logical, r.phys);
    if (bad) {
      snprintf (why, whylen, "journal record %" PRIu64 " (%s logical slot %"
                PRIu32 ", physical %" PRIu32 ") contradicts the map",
                r.seq, r.type == THIN_REC_MAP ? "map" : "unmap", r.logical,
                r.phys);
      return -1;
    }
    rec->next_seq++;
    rec->records++;
  }
  rec->valid_len = off;
  thin_map_replay_done (m);
  return 0;
}
