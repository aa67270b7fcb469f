/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's meta file format version 1, read so that it
 * can be converted (thin-meta.c writes a version 2 checkpoint at once).
 * Version 1 kept one entry per logical slot:
 *   header, THIN_V1_HEADER_SIZE bytes:
 *     0-63 as in version 2 (magic, version 1, sizes, backend)
 *    64 next sequence number (u64)              72 high water (u32)
 *    76 logical slots (u32)                     80 compressed size (u64)
 *    88 unix time of the checkpoint (u64)       96 CRC-32C of the header
 *       (this field as 0), the name and the payload (u32)
 *   100 name length (u32), 104 the backend's name (no NUL)
 *   payload: one zstd frame of one u32 per logical slot, each the
 *   difference (modulo 2^32) of (physical slot + 1, or 0 if unmapped)
 *   from the previous slot's
 *   then records of THIN_V1_RECORD_SIZE bytes:
 *     0 type (u32: 1 map, 2 unmap)   4 physical slot (u32)
 *     8 sequence number (u64)       16 logical slot (u32)
 *    20 CRC-32C of bytes 0-19 (u32)
 * The high-water mark (slots below it had been used) has no meaning now.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "crc32c.h"
#include "file-header.h"
#include "fileio.h"
#include "reclog.h"
#include "le.h"
#include "thin-pure.h"

enum {
  OFF_SEQ = 64, OFF_NSLOTS = 76, OFF_PAYLEN = 80, OFF_TIME = 88,
  OFF_CRC = 96, OFF_NAMELEN = 100,
};

static int
decode_record (const unsigned char *in, struct thin_record *r)
{
  if (!reclog_intact (in, THIN_V1_RECORD_SIZE))
    return -1;
  r->type = get32 (in);
  r->phys = get32 (in + 4);
  r->seq = get64 (in + 8);
  r->logical = get32 (in + 16);
  r->count = 1;
  return r->type == THIN_REC_MAP || r->type == THIN_REC_UNMAP ? 0 : -1;
}

/* The per-slot table, as runs: consecutive logical slots on consecutive
 * physical ones become one.
 */
static int
load_table (const unsigned char *raw, struct thin_map *m)
{
  uint64_t run_l = 0, run_n = 0;
  uint32_t run_p = 0, prev = 0;

  for (uint64_t l = 0; l < m->nlogical; l++) {
    uint32_t p;

    prev += get32 (raw + 4 * l);
    p = prev - 1;
    if (p != UINT32_MAX && run_n > 0 && l == run_l + run_n &&
        p == run_p + run_n) {
      run_n++;
      continue;
    }
    if (run_n > 0 && thin_map_add (m, run_l, run_n, run_p) == -1)
      return -1;
    run_n = p != UINT32_MAX;
    run_l = l;
    run_p = p;
  }
  return run_n > 0 ? thin_map_add (m, run_l, run_n, run_p) : 0;
}

static int
load_checkpoint (const unsigned char *p, size_t len,
                 const struct thin_meta_id *id, struct thin_map *m,
                 struct thin_recovery *rec, char *why, size_t whylen)
{
  static const struct file_frame_layout layout = {
    .what = "the version 1 checkpoint", .hsize = THIN_V1_HEADER_SIZE,
    .off_namelen = OFF_NAMELEN, .off_paylen = OFF_PAYLEN, .off_crc = OFF_CRC,
    .name_max = sizeof id->backend.name,
  };
  uint64_t paylen, nlogical = m->nlogical;
  size_t namelen, end, r;
  struct file_frame f;
  unsigned char *raw;
  int ret = -1;

  if (file_frame_check (p, len, &layout, &f, why, whylen) == -1)
    return -1;
  namelen = f.namelen;
  paylen = f.paylen;
  end = f.end;
  if (thin_check_identity (p, (const char *) p + THIN_V1_HEADER_SIZE,
                           namelen, id, why, whylen) == -1)
    return -1;
  if (nlogical > UINT32_MAX || get32 (p + OFF_NSLOTS) != nlogical)
    return fileio_fail (why, whylen, "the version 1 checkpoint has %" PRIu32
                        " slots, expected %" PRIu64,
                        get32 (p + OFF_NSLOTS), nlogical);
  raw = malloc (nlogical * 4 + 1);
  if (raw == NULL)
    return fileio_fail (why, whylen, "out of memory");
  r = ZSTD_decompress (raw, nlogical * 4, p + THIN_V1_HEADER_SIZE + namelen,
                       paylen);
  if (ZSTD_isError (r) || r != nlogical * 4)
    fileio_fail (why, whylen, "the version 1 checkpoint does not decompress "
                 "to the map");
  else if (load_table (raw, m) == -1 ||
           (rec->free = thin_map_free_set (m)) == NULL)
    fileio_fail (why, whylen, "%s", errno == ENOMEM ? "out of memory" :
                 "the version 1 checkpoint maps a slot out of range or twice");
  else
    ret = 0;
  free (raw);
  rec->next_seq = get64 (p + OFF_SEQ);
  rec->checkpoint_time = get64 (p + OFF_TIME);
  rec->checkpoint_len = end;
  return ret;
}

int
thin_meta_recover_v1 (const unsigned char *p, size_t len,
                      const struct thin_meta_id *id, struct thin_map *m,
                      struct thin_recovery *rec, char *why, size_t whylen)
{
  if (load_checkpoint (p, len, id, m, rec, why, whylen) == -1)
    return -1;
  return thin_replay_records (p, len, rec->checkpoint_len,
                              THIN_V1_RECORD_SIZE, decode_record, m, rec,
                              why, whylen);
}
