/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the prefix codec and the checks the on-disk formats'
 * loaders share (see file-header.h).
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "arith.h"
#include "crc32c.h"
#include "file-header.h"
#include "fileio.h"
#include "le.h"

enum { OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HSIZE = 12 };

void
file_prefix_put (unsigned char *p, const struct file_format *f,
                 uint32_t hsize)
{
  memcpy (p + OFF_MAGIC, f->magic, sizeof f->magic);
  put32 (p + OFF_VERSION, f->version);
  put32 (p + OFF_HSIZE, hsize);
}

/* "versions 1 and 2": the versions f reads, for the message. */
static void
versions_text (char *buf, size_t len, const struct file_format *f)
{
  if (f->oldest == f->version)
    snprintf (buf, len, "version %" PRIu32, f->version);
  else
    snprintf (buf, len, "versions %" PRIu32 " %s %" PRIu32, f->oldest,
              f->version == f->oldest + 1 ? "and" : "to", f->version);
}

int
file_prefix_get (const unsigned char *p, size_t len,
                 const struct file_format *f, uint32_t *version,
                 char *why, size_t whylen)
{
  char reads[64];
  uint32_t v;

  if (len < FILE_PREFIX_SIZE ||
      memcmp (p + OFF_MAGIC, f->magic, sizeof f->magic) != 0)
    return fileio_fail (why, whylen, "not a discardcache %s", f->what);
  v = get32 (p + OFF_VERSION);
  if (v < f->oldest || v > f->version) {
    versions_text (reads, sizeof reads, f);
    return fileio_fail (why, whylen, "format version %" PRIu32 ", this "
                        "discardcache reads %s", v, reads);
  }
  *version = v;
  return 0;
}

uint32_t
file_frame_crc (const unsigned char *p, size_t len, size_t off_crc)
{
  static const unsigned char zero[4];
  uint32_t crc = crc32c (0, p, off_crc);

  crc = crc32c (crc, zero, sizeof zero);
  return crc32c (crc, p + off_crc + 4, len - off_crc - 4);
}

int
file_frame_check (const unsigned char *p, size_t len,
                  const struct file_frame_layout *l, struct file_frame *f,
                  char *why, size_t whylen)
{
  uint64_t end;

  if (len < l->hsize)
    return fileio_fail (why, whylen,
                        "%s is truncated or corrupt: %zu bytes, less than "
                        "its %zu-byte header", l->what, len, l->hsize);
  f->namelen = get32 (p + l->off_namelen);
  f->paylen = get64 (p + l->off_paylen);
  if (get32 (p + 12) != l->hsize || f->namelen >= l->name_max)
    return fileio_fail (why, whylen, "%s has a corrupt header", l->what);
  end = l->hsize + f->namelen;
  if (ADD_OVERFLOW (end, f->paylen, &end) || end > len ||
      (l->whole && end != len))
    return fileio_fail (why, whylen,
                        "%s is truncated or corrupt: %zu bytes, its header "
                        "says %s%" PRIu64, l->what, len,
                        l->whole ? "" : "at least ", end);
  f->end = end;
  if (get32 (p + l->off_crc) != file_frame_crc (p, end, l->off_crc))
    return fileio_fail (why, whylen, "%s is corrupt (checksum mismatch)",
                        l->what);
  return 0;
}

int
file_same_backend (const struct file_backend *was,
                   const struct file_backend *now, char *why, size_t whylen)
{
  bool has_inode = now->dev != 0 || now->ino != 0;
  bool had_inode = was->dev != 0 || was->ino != 0;

  if (strcmp (was->kind, now->kind) != 0)
    return fileio_fail (why, whylen, "saved for a %s backend, this one is %s",
                        was->kind, now->kind);
  /* Saved before the store had a stable name here (an older version, or
   * a disk whose name sysfs no longer shows): the numbers cannot be
   * matched to the name, so it is not trusted.
   */
  if (had_inode && !has_inode)
    return fileio_fail (why, whylen,
                        "saved for %.*s by device number (%u:%u), this %s "
                        "is known by its own name now (%.*s): not loaded, "
                        "as the two cannot be matched",
                        (int) was->namelen, was->name, major (was->dev),
                        minor (was->dev), now->kind, (int) now->namelen,
                        now->name);
  if (has_inode && (was->dev != now->dev || was->ino != now->ino))
    return fileio_fail (why, whylen,
                        "saved for another %s (device %u:%u inode %" PRIu64
                        ", %.*s), this is device %u:%u inode %" PRIu64,
                        was->kind, major (was->dev), minor (was->dev),
                        was->ino, (int) was->namelen, was->name,
                        major (now->dev), minor (now->dev), now->ino);
  if (!has_inode && (was->namelen != now->namelen ||
                     memcmp (was->name, now->name, now->namelen) != 0))
    return fileio_fail (why, whylen, "saved for another %s (%.*s), this is "
                        "%.*s", was->kind, (int) was->namelen, was->name,
                        (int) now->namelen, now->name);
  return 0;
}
