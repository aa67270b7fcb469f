/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: who holds an RBD image's exclusive lock, and taking it
 * over from a crashed instance of this server (rbd-internal.h).
 *
 * A server killed with -9 keeps its watch on the image, and so the lock,
 * until the OSD expires the watch (osd_client_watch_timeout, 30 s by
 * default): a restart was refused that long, with a message saying to
 * stop a holder that was already dead.  Ceph's own exclusive-lock
 * takeover breaks such a lock by fencing the holder first (blocklisting
 * its client address, so that it can write nothing more even if it was
 * only paused), and so does this, but only for a holder known to be the
 * previous instance of this server: its lock owner address, recorded by
 * that instance in a file beside state= (the service's state= with
 * ".holder" appended).  The record is a local file, not the image's
 * metadata, because "this server" is a local notion: a second server
 * elsewhere reading the image's metadata would take it for its own
 * predecessor and fence a live peer.  A live holder that is anyone else
 * is refused, named from the image's metadata key discardcache.holder
 * (written by every discardcache that takes the lock) where it matches.
 */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "rbd-internal.h"

/* The image metadata key naming the discardcache that holds the lock. */
#define HOLDER_KEY "discardcache.holder"

/* Our own address as the lock's owner list shows it, into buf. */
static int
own_address (struct rbd_backend *h, char *buf, size_t len)
{
  char *owners[RBD_MAX_CLIENTS];
  size_t n = RBD_MAX_CLIENTS;
  rbd_lock_mode_t mode;
  int r = h->lib->rbd_lock_get_owners (h->image, &mode, owners, &n);

  if (r < 0 || n == 0)
    return -1;
  snprintf (buf, len, "%s", owners[0]);
  h->lib->rbd_lock_get_owners_cleanup (owners, n);
  return 0;
}

void
rbd_holder_record (struct rbd_backend *h)
{
  const char *file = h->opts.holder_file;
  char addr[256], host[HOST_NAME_MAX + 1] = "?", text[600];
  struct fileio_buffer buf = { .data = text };
  const char *step;
  int r;

  if (own_address (h, addr, sizeof addr) == -1) {
    dc_debug ("backend %s: own lock address not found: nothing recorded",
              h->b.identity.name);
    return;
  }
  gethostname (host, sizeof host);
  host[sizeof host - 1] = '\0';
  snprintf (text, sizeof text, "%s pid %ld on %s", addr, (long) getpid (),
            host);
  r = h->lib->rbd_metadata_set (h->image, HOLDER_KEY, text);
  if (r < 0) {
    errno = -r;
    dc_debug ("backend %s: image metadata %s not set: %m",
              h->b.identity.name, HOLDER_KEY);
  }
  /* Without the record, a crash is followed by a wait for the watch to
   * expire, as without state=: worth a message, not a refusal.
   */
  buf.len = snprintf (text, sizeof text, "%s\n", addr);
  if (file && fileio_replace (file, 0600, 0, fileio_write_buffer, &buf,
                              &step) == -1)
    dc_error ("backend %s: %s: cannot %s: %m: a restart after a crash will wait "
              "for the image's lock to expire", h->b.identity.name, file,
              step);
}

bool
rbd_holder_is_ours (struct rbd_backend *h, const char *owner)
{
  const char *file = h->opts.holder_file;
  char line[256] = "";
  FILE *fp;

  if (file == NULL || (fp = fopen (file, "re")) == NULL)
    return false;
  if (fgets (line, sizeof line, fp) == NULL)
    line[0] = '\0';
  fclose (fp);
  line[strcspn (line, "\n")] = '\0';
  return line[0] != '\0' && strcmp (line, owner) == 0;
}

void
rbd_holder_describe (struct rbd_backend *h, const char *owner, char *buf,
                     size_t len)
{
  char meta[600];
  size_t n = sizeof meta, alen = strlen (owner);
  int r = h->lib->rbd_metadata_get (h->image, HOLDER_KEY, meta, &n);

  if (r >= 0 && strncmp (meta, owner, alen) == 0 && meta[alen] == ' ')
    snprintf (buf, len, "another discardcache server (client %s, %s)",
              owner, meta + alen + 1);
  else
    snprintf (buf, len, "a client that is not discardcache (client %s: "
              "qemu-nbd, a virtual machine or a kernel mapping; rbd status "
              "lists it)", owner);
}

int
rbd_holder_fence (struct rbd_backend *h, const char *owner)
{
  int r;

  dc_error ("backend %s: the image's lock is held by client %s, the "
            "previous instance of this server (recorded in %s), which did "
            "not stop cleanly: fencing it (blocklist) and taking the lock "
            "over", h->b.identity.name, owner, h->opts.holder_file);
  r = h->lib->rbd_lock_break (h->image, RBD_LOCK_MODE_EXCLUSIVE, owner);
  if (r < 0 && r != -ENOENT) {
    errno = -r;
    dc_error ("backend=%s: cannot break the lock of client %s: %m",
              h->b.identity.name, owner);
    return -1;
  }
  return 0;
}
