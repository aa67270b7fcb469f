/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: recovering thin mode's meta file (thin-pure.h): pick the
 * reader for the image's format version.  Above both readers
 * (thin-journal.c for versions 2 and 3, thin-meta-v1.c for version 1),
 * which share the record replay and the identity check below them.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fileio.h"
#include "thin-pure.h"

int
thin_meta_recover (const void *image, size_t len,
                   const struct thin_meta_id *id, struct thin_map *m,
                   struct thin_recovery *rec, char *why, size_t whylen)
{
  const unsigned char *p = image;
  int r;

  memset (rec, 0, sizeof *rec);
  if (thin_meta_version (p, len, &rec->version, why, whylen) == -1)
    return -1;
  if ((rec->reserve = extmap_new ()) == NULL)
    return fileio_fail (why, whylen, "out of memory");
  switch (rec->version) {
  case 1:
    r = thin_meta_recover_v1 (p, len, id, m, rec, why, whylen);
    break;
  default:                      /* 2 and THIN_VERSION: no other is read */
    r = thin_meta_recover_v3 (p, len, id, m, rec, why, whylen);
  }
  if (r == -1)
    thin_recovery_release (rec);
  return r;
}

void
thin_recovery_release (struct thin_recovery *rec)
{
  extmap_free (rec->free);
  extmap_free (rec->reserve);
  rec->free = rec->reserve = NULL;
}
