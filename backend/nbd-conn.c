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
 * its write cache would.  Every request in flight on a lost connection
 * is sent again; the loss is logged once per connection, and one
 * connect attempt runs at a time (the requests that need it too wait
 * for its outcome).
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
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "log.h"
#include "nbd-internal.h"

/* Connecting and negotiating must finish within this. */
#define CONNECT_TIMEOUT_MS 10000
/* After a failed connect, the next attempt waits this long. */
#define RECONNECT_INTERVAL_MS 500

/* Drive the connection until it is ready, dead, or out of time; the
 * synchronous nbd_connect_uri would wait on a TCP connect for minutes.
 */
static const char *
negotiate (struct nbd_handle *nbd, const char *uri)
{
  uint64_t deadline = monotonic_ms () + CONNECT_TIMEOUT_MS;

  if (nbd_aio_connect_uri (nbd, uri) == -1)
    return nbd_get_error ();
  while (nbd_aio_is_connecting (nbd) == 1) {
    uint64_t now = monotonic_ms ();

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

/* The reader: drives the connection (sends what waits to be sent,
 * reads replies, which completes the requests waiting for them) until
 * it is lost or closed.  Requests issued on another thread write their
 * command themselves when they can, and kick the reader when it is left
 * to be written (nbdc_kick).
 */
static void *
reader (void *arg)
{
  struct nbd_conn *c = arg;
  int fd = nbd_aio_get_fd (c->nbd);

  while (!atomic_load (&c->stopping) &&
         nbd_aio_is_dead (c->nbd) != 1 && nbd_aio_is_closed (c->nbd) != 1) {
    struct pollfd fds[2] = {
      { .fd = fd }, { .fd = c->kick, .events = POLLIN },
    };
    unsigned dir = nbd_aio_get_direction (c->nbd);
    int r = 0;

    if (dir & LIBNBD_AIO_DIRECTION_READ)
      fds[0].events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE)
      fds[0].events |= POLLOUT;
    if (poll (fds, 2, -1) == -1) {
      if (errno != EINTR)
        dc_debug ("nbd reader: poll: %m");
      continue;
    }
    if (fds[1].revents & POLLIN) {
      uint64_t n;

      if (read (c->kick, &n, sizeof n) == -1 && errno != EAGAIN)
        dc_debug ("nbd reader: eventfd: %m");
    }
    dir = nbd_aio_get_direction (c->nbd);
    if ((dir & LIBNBD_AIO_DIRECTION_READ) &&
        (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
      r = nbd_aio_notify_read (c->nbd);
    else if ((dir & LIBNBD_AIO_DIRECTION_WRITE) &&
             (fds[0].revents & (POLLOUT | POLLHUP | POLLERR)))
      r = nbd_aio_notify_write (c->nbd);
    /* A failure leaves the handle dead, its requests completed with an
     * error: the loop ends.
     */
    if (r == -1)
      dc_debug ("nbd reader: %s", nbd_get_error ());
  }
  return NULL;
}

static void
conn_free (struct nbd_conn *c)
{
  if (c->nbd)
    nbd_close (c->nbd);
  if (c->kick >= 0)
    close (c->kick);
  free (c);
}

/* A negotiated handle, or NULL: the reason in *why and errno. */
static struct nbd_handle *
open_handle (const char *uri, const char **why)
{
  struct nbd_handle *nbd = nbd_create ();

  if (nbd == NULL) {
    *why = nbd_get_error ();
    return NULL;
  }
  /* Block status where the server offers it (extents); asked for on
   * every connection, since any may serve the request.
   */
  nbd_add_meta_context (nbd, LIBNBD_CONTEXT_BASE_ALLOCATION);
  *why = negotiate (nbd, uri);
  if (*why == NULL)
    return nbd;
  errno = nbd_get_errno () > 0 ? nbd_get_errno () : errno ? errno : EIO;
  {
    int err = errno;
    nbd_close (nbd);
    errno = err;
  }
  return NULL;
}

struct nbd_conn *
nbdc_connect (const char *uri, bool first)
{
  struct nbd_conn *c = calloc (1, sizeof *c);
  const char *why = NULL;
  int err;

  if (c == NULL) {
    dc_error ("backend=%s: %m", uri);
    return NULL;
  }
  c->kick = -1;
  c->nbd = open_handle (uri, &why);
  if (c->nbd == NULL)
    goto err;
  c->kick = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->kick != -1)
    return c;
  why = "eventfd failed";

 err:
  err = errno ? errno : EIO;
  if (first)
    dc_error ("backend=%s: %s", uri, why ? why : "unknown error");
  else
    dc_debug ("backend %s: connect: %s", uri, why ? why : "unknown error");
  conn_free (c);
  errno = err;
  return NULL;
}

int
nbdc_start (struct nbd_conn *c)
{
  int err = pthread_create (&c->reader, NULL, reader, c);

  if (err) {
    errno = err;
    dc_error ("backend: cannot start the NBD reader thread: %m");
    return -1;
  }
  c->running = true;
  return 0;
}

void
nbdc_close (struct nbd_conn *c, bool polite)
{
  uint64_t one = 1;

  if (c == NULL)
    return;
  atomic_store (&c->stopping, true);
  if (c->running) {
    if (write (c->kick, &one, sizeof one) == -1)
      dc_debug ("nbd: eventfd: %m");
    pthread_join (c->reader, NULL);
  }
  /* The reader is gone: this thread alone drives the handle now. */
  if (polite && !nbdc_lost (c) && nbd_shutdown (c->nbd, 0) == -1)
    dc_debug ("nbd: shutdown: %s", nbd_get_error ());
  conn_free (c);
}

void
nbdc_kick (struct nbd_conn *c)
{
  uint64_t one = 1;

  /* Anything else that leaves a command unsent happens on the reader,
   * which looks at the direction again before it polls.
   */
  if ((nbd_aio_get_direction (c->nbd) & LIBNBD_AIO_DIRECTION_WRITE) &&
      write (c->kick, &one, sizeof one) == -1 && errno != EAGAIN)
    dc_debug ("nbd: eventfd: %m");
}

bool
nbdc_lost (struct nbd_conn *c)
{
  return atomic_load (&c->broken) ||
    nbd_aio_is_dead (c->nbd) == 1 || nbd_aio_is_closed (c->nbd) == 1;
}

/* nbdkit, on SIGTERM, answers ESHUTDOWN but exits only once its clients
 * have gone; until then its socket still takes connections and never
 * answers them.  Holding the broken connection open until a new one is
 * made would make every reconnect wait out CONNECT_TIMEOUT_MS, so the
 * goodbye goes at once (the reader writes it; the requests still in
 * flight on c complete with an error when the server closes, and are
 * sent again on the new connection).
 */
void
nbdc_abandon (struct nbd_conn *c)
{
  if (atomic_exchange (&c->broken, true))
    return;
  if (nbd_aio_is_dead (c->nbd) == 1 || nbd_aio_is_closed (c->nbd) == 1)
    return;
  if (nbd_aio_disconnect (c->nbd, 0) == -1)
    dc_debug ("nbd: disconnect: %s", nbd_get_error ());
  else if (c->running)
    nbdc_kick (c);
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
  h->next_attempt_ms = monotonic_ms () + RECONNECT_INTERVAL_MS;
}

void
nbdc_put (struct nbd_backend *h, struct nbd_conn *c)
{
  bool last;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
    c->users--;
    last = c->retired && c->users == 0;
  }
  if (last)
    nbdc_close (c, false);
}

/* Slot i's connection, held, if usable; else NULL with the lost one in
 * *old, or errno = EIO if no attempt is due yet.
 */
static struct nbd_conn *
usable_in_slot (struct nbd_backend *h, unsigned i, struct nbd_conn **old)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);

  *old = h->conn[i];
  if (!nbdc_lost (h->conn[i])) {
    h->conn[i]->users++;
    return h->conn[i];
  }
  if (monotonic_ms () < h->next_attempt_ms)
    *old = NULL;
  return NULL;
}

struct nbd_conn *
nbdc_renew (struct nbd_backend *h, unsigned i, struct nbd_conn *c)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->reconnecting);
  struct nbd_conn *fresh, *old;
  bool close_old = false;

  nbdc_put (h, c);
  /* Another request may have renewed the slot while this one waited. */
  fresh = usable_in_slot (h, i, &old);
  if (fresh != NULL)
    return fresh;
  if (old == NULL) {
    errno = EIO;
    return NULL;
  }
  fresh = nbdc_connect (h->uri, false);
  if (fresh != NULL && (!same_server (h, fresh->nbd) ||
                        (h->started && nbdc_start (fresh) == -1))) {
    nbdc_close (fresh, true);
    fresh = NULL;
  }
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
    attempt_done_locked (h, fresh != NULL);
    if (fresh != NULL) {
      old->retired = true;
      close_old = old->users == 0;
      h->conn[i] = fresh;
      fresh->users = 1;
    }
  }
  if (close_old)
    nbdc_close (old, false);
  if (fresh == NULL)
    errno = EIO;
  return fresh;
}

void
nbdc_note_lost (struct nbd_backend *h, unsigned i, struct nbd_conn *c,
                const char *why)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);

  if (c->noted_lost)
    return;
  c->noted_lost = true;
  dc_error ("backend %s: connection %u lost: %s", h->uri, i, why);
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
