/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the client side of the NBD fixed newstyle handshake on a
 * Unix socket, written by hand because the socket must be handed to the
 * kernel afterwards (libnbd keeps its own).
 */
#ifndef DISCARDCACHE_NBD_HANDSHAKE_H
#define DISCARDCACHE_NBD_HANDSHAKE_H

#include <stdint.h>

/* What NBD_OPT_GO told about the export. */
struct nbd_export_info {
  uint64_t size;               /* bytes */
  uint16_t flags;              /* transmission flags (NBD_FLAG_*) */
  uint32_t min_block;          /* NBD_INFO_BLOCK_SIZE, 0 if not sent */
  uint32_t pref_block;
};

/* Connect to the server at PATH and negotiate the default export ("")
 * with NBD_OPT_GO.  Returns the socket, ready for transmission, and
 * fills INFO; -1 with errno and the error reported.  QUIET: report
 * nothing (the keeper retries while a server restarts).
 */
extern int nbd_handshake_unix (const char *path, struct nbd_export_info *info,
                               int quiet);

#endif /* DISCARDCACHE_NBD_HANDSHAKE_H */
