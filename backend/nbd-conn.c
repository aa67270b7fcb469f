/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the NBD backend's connections: connecting within a
 * timeout, noticing that a server went away, and reconnecting when it
 * comes back (see nbd-internal.h).
 *
 * Policy.  A request that finds its connection lost reconnects at once
 * and is sent again on the new connection (every NBD command we send is
 * idempotent: the same data at the same offset, or a flush).  A server
 * that answers ESHUTDOWN is shutting down (nbdkit on SIGTERM answers so
 * to what it has not started): its connection counts as lost, so the
 * client sees EIO, as for any other loss, never ESHUTDOWN.  While the
 * server stays away, requests fail with EIO, one connect attempt per
 * RECONNECT_INTERVAL_MS at most, so clients get their errors at once
 * rather than queueing behind connects; the engine keeps failed
 * discards pending and retries them.  Once the server is back, the next
 * request reconnects.  Acknowledged writes that no flush covered may
 * have died with the server (nbdkit memory, a server's own cache), so
 * the first flush after such a loss fails with EIO, as a disk that lost
 * its write cache would.
 *
 * Limit.  If the connection breaks while the server lives on (a TCP
 * link going down), the server may still execute a request it had
 * received, after our retry and after later requests made on the new
 * connection.  NBD has no way to fence a dead connection's requests.
 * With a server on a Unix socket, a lost connection means the server
 * exited, and nothing of it runs later.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <time.h>

#include "cleanup.h"
#include "log.h"
#include "nbd-internal.h"

/* Connecting and negotiating must finish within this. */
#define CONNECT_TIMEOUT_MS 10000
/* After a failed connect, the next attempt waits this long. */
#define RECONNECT_INTERVAL_MS 500

static uint64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Drive the connection until it is ready, dead, or out of time; the
 * synchronous nbd_connect_uri would wait on a TCP connect for minutes.
 */
static const char *
negotiate (struct nbd_handle *nbd, const char *uri)
{
  uint64_t deadline = now_ms () + CONNECT_TIMEOUT_MS;

  if (nbd_aio_connect_uri (nbd, uri) == -1)
    return nbd_get_error ();
  while (nbd_aio_is_connecting (nbd) == 1) {
    uint64_t now = now_ms ();

    if (now >= deadline) {
      errno = ETIMEDOUT;
      return "no answer within the connect timeout";
    }
    if (nbd_poll (nbd, deadline - now) == -1)
      return nbd_get_error ();
  }
  if (nbd_aio_is_ready (nbd) != 1) {
    errno = ECONNREFUSED;
    return "the server closed the connection during negotiation";
  }
  return NULL;
}

struct nbd_handle *
nbdc_connect (const char *uri, bool first)
{
  struct nbd_handle *nbd = nbd_create ();
  const char *why;

  /* Block status where the server offers it (extents); asked for on
   * every connection, since any may serve the request.
   */
  if (nbd)
    nbd_add_meta_context (nbd, LIBNBD_CONTEXT_BASE_ALLOCATION);
  why = nbd ? negotiate (nbd, uri) : nbd_get_error ();
  int err;

  if (why == NULL)
    return nbd;
  err = nbd_get_errno () > 0 ? nbd_get_errno () : errno ? errno : EIO;
  if (first)
    dc_error ("backend=%s: %s", uri, why ? why : "unknown error");
  else
    dc_debug ("backend %s: connect: %s", uri, why ? why : "unknown error");
  nbd_close (nbd);
  errno = err;
  return NULL;
}

bool
nbdc_lost (struct nbd_handle *nbd)
{
  return nbd_aio_is_dead (nbd) == 1 || nbd_aio_is_closed (nbd) == 1;
}

/* A server that came back must be the one we had: same size, and
 * writable if we write.
 */
static bool
same_server (struct nbd_backend *h, struct nbd_handle *nbd)
{
  int64_t size = nbd_get_size (nbd);

  if (size != (int64_t) h->b.size) {
    dc_error ("backend %s: the server came back with size %" PRId64
              ", not %" PRIu64 ": not using it", h->uri, size, h->b.size);
    return false;
  }
  if (!h->b.limits.read_only && nbd_is_read_only (nbd) != 0) {
    dc_error ("backend %s: the server came back read-only: not using it",
              h->uri);
    return false;
  }
  return true;
}

/* Record the outcome of a connect attempt (lock held). */
static void
attempt_done_locked (struct nbd_backend *h, bool ok)
{
  if (ok) {
    if (h->down)
      dc_error ("backend %s: reconnected", h->uri);
    h->down = false;
    h->next_attempt_ms = 0;
    return;
  }
  if (!h->down)
    dc_error ("backend %s: cannot reconnect: requests fail with EIO, "
              "trying again every %d ms", h->uri, RECONNECT_INTERVAL_MS);
  h->down = true;
  h->next_attempt_ms = now_ms () + RECONNECT_INTERVAL_MS;
}

int
nbdc_ensure (struct nbd_backend *h, unsigned i)
{
  struct nbd_handle *nbd;

  if (!h->leaving[i] && !nbdc_lost (h->nbd[i]))
    return 0;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
    if (now_ms () < h->next_attempt_ms) {
      errno = EIO;
      return -1;
    }
  }
  nbd = nbdc_connect (h->uri, false);
  if (nbd != NULL && !same_server (h, nbd)) {
    nbd_close (nbd);
    nbd = NULL;
  }
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
    attempt_done_locked (h, nbd != NULL);
  }
  if (nbd == NULL) {
    errno = EIO;
    return -1;
  }
  nbd_close (h->nbd[i]);
  h->nbd[i] = nbd;
  h->leaving[i] = false;
  return 0;
}

void
nbdc_note_lost (struct nbd_backend *h, unsigned i)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);

  dc_error ("backend %s: connection %u lost: %s", h->uri, i,
            nbd_get_error () ? nbd_get_error () : "unknown error");
  h->losses++;
  if (h->writes > h->flushed_writes)
    h->lost_writes = true;
}

void
nbdc_write_done (struct nbd_backend *h)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
  h->writes++;
}

void
nbdc_flush_start (struct nbd_backend *h, uint64_t token[2])
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
  token[0] = h->writes;
  token[1] = h->losses;
}

int
nbdc_flush_done (struct nbd_backend *h, const uint64_t token[2])
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);

  /* The writes counted at the start are durable, unless a connection
   * was lost meanwhile (then the flush may not have covered them).
   */
  if (h->losses == token[1] && token[0] > h->flushed_writes)
    h->flushed_writes = token[0];
  if (h->lost_writes) {
    h->lost_writes = false;
    errno = EIO;
    dc_error ("backend %s: flush: a connection to the server was lost "
              "with writes no flush had covered; they may be lost", h->uri);
    return -1;
  }
  return 0;
}
