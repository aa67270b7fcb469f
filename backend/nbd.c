/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the NBD backend, another NBD server reached through
 * libnbd's aio API.  Functions are named nbdb_* (nbd_* is libnbd's
 * namespace).
 *
 * Concurrency: as in nbdkit's nbd plugin, each connection has a reader
 * thread (nbd-conn.c); a request is issued on a connection from the
 * caller's thread (libnbd writes it at once when it can) and the caller
 * sleeps until the reader completes it.  So any number of requests are
 * in flight on one connection, the server reads them one after the
 * other from its socket, and a slow TRIM stalls nothing behind it on
 * our side.  (A synchronous call would hold the handle until its reply:
 * one request per connection, and a server that wakes a thread per
 * request, four times the context switches per write on the server.)
 * When the server advertises multi-conn (a flush on one connection
 * covers writes made on all of them) there is a small pool: requests
 * fill the first connection up to NBDB_CONN_DEPTH in flight before
 * the next takes new ones, so a busy server still reads its requests
 * in batches, and trims go to the last connection, so that a server
 * that serves a connection's requests in order does not hold reads
 * behind a slow TRIM.  Without multi-conn, a flush on one connection
 * would not cover the others, so there is a single connection.
 *
 * Connections are made, checked and remade in nbd-conn.c: a request
 * that finds its connection lost (the server exited, or answered
 * ESHUTDOWN) reconnects and is sent again; while the server is away
 * requests fail with EIO.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#include "arith.h"
#include "cleanup.h"
#include "internal.h"
#include "log.h"
#include "nbd-internal.h"

/* pread/pwrite are cut to this (or the server's maximum block size if
 * smaller): libnbd refuses requests over 64 MiB, and so do most servers.
 */
#define NBDB_MAX_REQUEST (32 * 1024 * 1024)

/* NBD request lengths are 32-bit: zero and trim go in chunks of this. */
#define NBDB_MAX_EFFECT BACKEND_MAX_DISCARD

/* The granularity for a server that advertises no block sizes: NBD
 * trims are byte-granular in the protocol, but servers free whole
 * blocks (a hole punch, a qcow2 cluster) and turn a partial block into
 * a zeroing write or nothing, so a sub-4K discard costs I/O and frees
 * nothing.  4096 is the block of the common file systems and of the
 * kernel's NBD client.
 */
#define NBDB_DEFAULT_GRANULARITY 4096

enum nbdb_cmd {
  CMD_PREAD, CMD_PWRITE, CMD_ZERO, CMD_TRIM, CMD_FLUSH, CMD_BLOCK_STATUS,
};
static const char *const cmd_names[] = {
  [CMD_PREAD] = "pread", [CMD_PWRITE] = "pwrite", [CMD_ZERO] = "zero",
  [CMD_TRIM] = "trim", [CMD_FLUSH] = "flush",
  [CMD_BLOCK_STATUS] = "block status",
};

/* Take a connection for cmd: trims on the last of several, the rest
 * on the first that is not full, else the least busy.
 */
static struct nbd_conn *
take_connection (struct nbd_backend *h, enum nbdb_cmd cmd, unsigned *slot)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
  unsigned best = 0;

  if (cmd == CMD_TRIM)
    best = h->nr - 1;
  else
    for (unsigned i = 0; i < h->nr; ++i) {
      if (h->conn[i]->users < NBDB_CONN_DEPTH) {
        best = i;
        break;
      }
      if (h->conn[i]->users < h->conn[best]->users)
        best = i;
    }
  h->conn[best]->users++;
  *slot = best;
  return h->conn[best];
}

/* libnbd's errno for the last failure on this thread (EIO if none). */
static int
last_errno (void)
{
  int err = nbd_get_errno ();

  return err > 0 ? err : EIO;
}

static const char *
last_error (void)
{
  const char *msg = nbd_get_error ();

  return msg ? msg : "unknown error";
}

/* Whether a failed trim means the server cannot trim.  nbdkit sends a
 * plugin's ENOTSUP as NBD_EINVAL for every command but a fast zero (its
 * nbd_errno() in server/protocol.c), so a server that advertises trim
 * and cannot do it answers EINVAL; our trims are aligned and in range
 * (nbdb_discard), so EINVAL is that answer and not a bad request.
 */
static bool
trim_unsupported (struct nbd_backend *h, int err)
{
  if (err == EINVAL)
    dc_debug ("backend %s: trim: the server answered EINVAL: taken as "
              "not supported", h->b.identity.name);
  return err == EINVAL || backend_is_enotsup (err);
}

/* A request in flight: the reader completes it. */
struct transaction {
  sem_t done;
  int err;
};

static int
transaction_done (void *opaque, int *error)
{
  struct transaction *t = opaque;

  t->err = *error;
  sem_post (&t->done);
  return 1;                     /* retire the command */
}

static int64_t
start_cmd (struct nbd_handle *nbd, enum nbdb_cmd cmd, void *buf,
           uint64_t count, uint64_t offset, uint32_t flags,
           nbd_completion_callback done)
{
  switch (cmd) {
  case CMD_PREAD: return nbd_aio_pread (nbd, buf, count, offset, done, flags);
  case CMD_PWRITE:
    return nbd_aio_pwrite (nbd, buf, count, offset, done, flags);
  case CMD_ZERO: return nbd_aio_zero (nbd, count, offset, done, flags);
  case CMD_TRIM: return nbd_aio_trim (nbd, count, offset, done, flags);
  case CMD_FLUSH: return nbd_aio_flush (nbd, done, flags);
  case CMD_BLOCK_STATUS:
    return nbd_aio_block_status (nbd, count, offset,
                                 *(nbd_extent_callback *) buf, done, flags);
  }
  abort ();
}

/* Before backend_start, no reader: the caller drives the connection
 * until its command completes (a lost connection completes every
 * command on it with an error).
 */
static int
drive_until_done (struct nbd_conn *c, struct transaction *t)
{
  while (sem_trywait (&t->done) == -1)
    if (nbd_poll (c->nbd, -1) == -1 && nbdc_lost (c) &&
        sem_trywait (&t->done) == -1)
      return EIO;
  return t->err;
}

/* Run one command on c and wait for its reply.  Returns 0, the errno
 * of a failed reply, or -1 if libnbd refused to issue it (its error for
 * this thread says why).
 */
static int
run_cmd (struct nbd_conn *c, enum nbdb_cmd cmd, void *buf,
         uint64_t count, uint64_t offset, uint32_t flags)
{
  struct transaction t = { .err = 0 };
  nbd_completion_callback done = {
    .callback = transaction_done, .user_data = &t,
  };
  int r;

  sem_init (&t.done, 0, 0);
  if (start_cmd (c->nbd, cmd, buf, count, offset, flags, done) == -1)
    r = -1;                     /* not issued: no completion comes */
  else if (c->running) {
    nbdc_kick (c);
    while (sem_wait (&t.done) == -1 && errno == EINTR)
      ;
    r = t.err;
  }
  else
    r = drive_until_done (c, &t);
  sem_destroy (&t.done);
  return r;
}

/* Send on a connection, reconnecting first if it was lost, and once
 * more on a new connection if it is lost during the request.  Returns
 * 0; 1 (errno EIO) if no connection could be had; or -1 with the
 * server's answer in *err and its text in *why.
 */
static int
send_cmd (struct nbd_backend *h, enum nbdb_cmd cmd, void *buf,
          uint64_t count, uint64_t offset, uint32_t flags,
          int *err, const char **why)
{
  unsigned i;
  struct nbd_conn *c = take_connection (h, cmd, &i);
  int r = 1;

  for (int attempt = 0; attempt < 2 && r == 1; attempt++) {
    int e;

    if (nbdc_lost (c)) {
      /* The reader saw it go while no request of ours was on it: the
       * loss counts all the same (the next flush must hear of it).
       */
      nbdc_note_lost (h, i, c, "the server closed the connection");
      if ((c = nbdc_renew (h, i, c)) == NULL) {
        errno = EIO;
        return 1;
      }
    }
    e = run_cmd (c, cmd, buf, count, offset, flags);
    if (e == -1) {              /* refused before it was sent */
      *err = last_errno ();
      *why = last_error ();
      e = *err;
    }
    else if (e != 0)
      *why = strerror (e);
    if (e == 0)
      r = 0;
    else if (e == ESHUTDOWN ||  /* not run: the server is going away */
             e == ENOTCONN)     /* lost; libnbd may not say so yet */
      nbdc_abandon (c);
    else if (!nbdc_lost (c)) {
      *err = e;
      r = -1;
    }
    if (r == 1)
      nbdc_note_lost (h, i, c, e == ESHUTDOWN ? "the server is shutting down"
                      : *why);
    else if (r == 0 && (cmd == CMD_PWRITE || cmd == CMD_ZERO) &&
             !(flags & LIBNBD_CMD_FLAG_FUA))
      nbdc_write_done (h);
  }
  nbdc_put (h, c);
  if (r == 1)
    errno = EIO;
  return r;
}

/* One request.  An unsupported trim returns EOPNOTSUPP silently; other
 * errors are reported.  A lost server is EIO to the caller, whatever
 * libnbd said (a client of ours would turn ENOTCONN or libnbd's EINVAL
 * for a dead handle into EINVAL).
 */
static int
issue (struct nbd_backend *h, enum nbdb_cmd cmd, void *buf,
       uint64_t count, uint64_t offset, uint32_t flags)
{
  int err = 0;
  const char *why = NULL;
  int r = send_cmd (h, cmd, buf, count, offset, flags, &err, &why);

  if (r == -1) {
    if (cmd == CMD_TRIM && trim_unsupported (h, err))
      err = EOPNOTSUPP;
    else
      dc_error ("backend %s: %s: %s", h->b.identity.name,
                cmd_names[cmd], why);
    errno = err;
  }
  else if (r == 1)
    dc_debug ("backend %s: %s: no connection to the server",
              h->b.identity.name, cmd_names[cmd]);
  return r == 0 ? 0 : -1;
}

/* A request cut into chunks of at most max bytes (buf, when not NULL,
 * advances with them).
 */
static int
issue_chunked (struct nbd_backend *h, enum nbdb_cmd cmd, char *buf,
               uint64_t count, uint64_t offset, uint32_t flags, uint64_t max)
{
  /* Every caller checked the range (backend_check_range); a chunk of 0
   * would never end.
   */
  VERIFY3U (offset + count, <=, h->b.size);
  VERIFY3U (max, >, 0);
  while (count > 0) {
    uint64_t n = MIN (count, max);

    if (issue (h, cmd, buf, n, offset, flags) == -1)
      return -1;
    if (buf)
      buf += n;
    count -= n;
    offset += n;
  }
  return 0;
}

/* A server without flush offers no durability to ask for.  A flush
 * after a lost connection fails if acknowledged writes may have been
 * lost with it (nbd-conn.c).
 */
static int
nbdb_flush (struct backend *b)
{
  struct nbd_backend *h = (struct nbd_backend *) b;
  uint64_t token[2];

  nbdc_flush_start (h, token);
  if (h->can_flush && issue (h, CMD_FLUSH, NULL, 0, 0, 0) == -1)
    return -1;
  return nbdc_flush_done (h, token);
}

/* FUA: the server's own when it has it, else a flush afterwards. */
static uint32_t
fua_flag (struct nbd_backend *h, bool fua)
{
  return fua && h->can_fua ? LIBNBD_CMD_FLAG_FUA : 0;
}

static int
emulate_fua (struct nbd_backend *h, bool fua)
{
  return fua && !h->can_fua ? nbdb_flush (&h->b) : 0;
}

static int
nbdb_pread (struct backend *b, void *buf, uint32_t count, uint64_t offset)
{
  struct nbd_backend *h = (struct nbd_backend *) b;

  if (backend_check_range (b, "pread", offset, count, false, EINVAL) == -1)
    return -1;
  return issue_chunked (h, CMD_PREAD, buf, count, offset, 0, h->max_request);
}

static int
nbdb_pwrite (struct backend *b, const void *buf, uint32_t count,
             uint64_t offset, bool fua)
{
  struct nbd_backend *h = (struct nbd_backend *) b;

  if (backend_check_range (b, "pwrite", offset, count, true, ENOSPC) == -1 ||
      issue_chunked (h, CMD_PWRITE, (char *) buf, count, offset,
                     fua_flag (h, fua), h->max_request) == -1)
    return -1;
  return emulate_fua (h, fua);
}

static int
nbdb_zero (struct backend *b, uint64_t offset, uint64_t length,
           bool may_trim, bool fua)
{
  struct nbd_backend *h = (struct nbd_backend *) b;
  uint32_t flags = fua_flag (h, fua) | (may_trim ? 0 : LIBNBD_CMD_FLAG_NO_HOLE);

  if (backend_check_range (b, "zero", offset, length, true, ENOSPC) == -1)
    return -1;
  if (!h->can_zero)
    return backend_write_zeroes (b, offset, length, fua);
  if (issue_chunked (h, CMD_ZERO, NULL, length, offset, flags,
                     NBDB_MAX_EFFECT) == -1)
    return -1;
  return emulate_fua (h, fua);
}

static int
nbdb_discard (struct backend *b, uint64_t offset, uint64_t length, bool fua)
{
  struct nbd_backend *h = (struct nbd_backend *) b;

  if (backend_check_range (b, "discard", offset, length, true, EINVAL) == -1)
    return -1;
  if (!h->can_trim) {
    errno = EOPNOTSUPP;
    return -1;
  }
  /* Whole granules only: a server with a minimum block size (or libnbd
   * for it) refuses misaligned requests.
   */
  if (!backend_discard_align_verified (b, &offset, &length))
    return 0;
  if (issue_chunked (h, CMD_TRIM, NULL, length, offset, fua_flag (h, fua),
                     NBDB_MAX_EFFECT) == -1)
    return -1;
  return emulate_fua (h, fua);
}

/* Block status: base:allocation's flags are backend.h's extent types.
 * The server may describe less than was asked: ask again from where
 * its answer ended.
 */
struct status {
  backend_extent_fn fn;
  void *opaque;
  uint64_t end;                 /* where the answers reached */
  uint64_t limit;               /* the end of the request */
};

static int
status_entries (void *user_data, const char *metacontext, uint64_t offset,
                uint32_t *entries, size_t nr_entries, int *error)
{
  struct status *st = user_data;

  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0)
    return 0;
  for (size_t i = 0; i + 1 < nr_entries && offset < st->limit; i += 2) {
    uint64_t len = MIN (entries[i], st->limit - offset);

    if (len == 0 || st->fn (offset, len, entries[i + 1] &
                            (BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO),
                            st->opaque) == -1) {
      *error = EIO;
      return -1;
    }
    offset += len;
  }
  st->end = MAX (st->end, offset);
  return 0;
}

static int
nbdb_extents (struct backend *b, uint64_t offset, uint64_t length,
              backend_extent_fn fn, void *opaque)
{
  struct nbd_backend *h = (struct nbd_backend *) b;
  struct status st = { .fn = fn, .opaque = opaque };
  nbd_extent_callback cb = { .callback = status_entries, .user_data = &st };

  if (!h->can_extents) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (backend_check_range (b, "extents", offset, length, false, EINVAL) == -1)
    return -1;
  st.limit = offset + length;
  for (st.end = offset; st.end < st.limit; ) {
    uint64_t from = st.end;

    if (issue (h, CMD_BLOCK_STATUS, &cb, MIN (st.limit - from,
                                               NBDB_MAX_EFFECT),
               from, 0) == -1)
      return -1;
    if (st.end == from) {       /* no progress: a broken answer */
      dc_error ("backend %s: block status at %" PRIu64 " described nothing",
                b->identity.name, from);
      errno = EIO;
      return -1;
    }
  }
  return 0;
}

static void
nbdb_close (struct backend *b)
{
  struct nbd_backend *h = (struct nbd_backend *) b;
  unsigned i;

  for (i = 0; i < h->nr; ++i)
    nbdc_close (h->conn[i], true);
  pthread_mutex_destroy (&h->reconnecting);
  pthread_mutex_destroy (&h->lock);
  free (h->uri);
  free (h);
}

/* The readers, after any fork; connections made later get theirs at
 * once (nbdc_renew).
 */
static int
nbdb_start (struct backend *b)
{
  struct nbd_backend *h = (struct nbd_backend *) b;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->reconnecting);

  for (unsigned i = 0; i < h->nr; ++i)
    if (!h->conn[i]->running && nbdc_start (h->conn[i]) == -1)
      return -1;
  h->started = true;
  return 0;
}

static const struct backend_ops nbdb_ops = {
  .kind = "nbd",
  .pread = nbdb_pread,
  .pwrite = nbdb_pwrite,
  .zero = nbdb_zero,
  .discard = nbdb_discard,
  .flush = nbdb_flush,
  .extents = nbdb_extents,
  .start = nbdb_start,
  .close = nbdb_close,
};

/* An advertised block size constraint, or 0. */
static uint32_t
block_size (struct nbd_handle *nbd, int which)
{
  int64_t v = nbd_get_block_size (nbd, which);

  return v > 0 && v <= UINT32_MAX ? v : 0;
}

/* Limits from the first connection. */
static int
nbdb_probe (struct nbd_backend *h, bool read_only)
{
  struct nbd_handle *nbd = h->conn[0]->nbd;
  struct backend_limits *l = &h->b.limits;
  int64_t size = nbd_get_size (nbd);
  int ro = nbd_is_read_only (nbd);
  uint64_t g = NBDB_DEFAULT_GRANULARITY;

  if (size == -1 || ro == -1) {
    errno = last_errno ();
    dc_error ("backend=%s: %s", h->b.identity.name, last_error ());
    return -1;
  }
  h->b.size = size;
  h->can_trim = nbd_can_trim (nbd) == 1;
  h->can_zero = nbd_can_zero (nbd) == 1;
  h->can_fua = nbd_can_fua (nbd) == 1;
  h->can_flush = nbd_can_flush (nbd) == 1;
  l->read_only = read_only || ro;
  l->can_discard = !l->read_only && h->can_trim;
  l->can_zero = !l->read_only && h->can_zero;
  l->can_fua = !l->read_only && h->can_fua;
  l->can_flush = h->can_flush;
  h->can_extents =
    nbd_can_meta_context (nbd, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
  l->can_extents = h->can_extents;
  l->discard_zeroes = false;    /* trimmed content is undefined in NBD */
  l->can_multi_conn = nbd_can_multi_conn (nbd) == 1;
  l->min_block = block_size (nbd, LIBNBD_SIZE_MINIMUM);
  l->pref_block = block_size (nbd, LIBNBD_SIZE_PREFERRED);
  l->max_block = block_size (nbd, LIBNBD_SIZE_MAXIMUM);
  /* A trim smaller than the preferred block would be a read-modify-write
   * at best: the granularity is at least the minimum and preferred
   * block, and 4096 when the server says nothing.
   */
  if (is_power_of_2 (l->min_block))
    g = MAX (g, l->min_block);
  if (is_power_of_2 (l->pref_block) && l->pref_block <= BACKEND_MAX_DISCARD)
    g = MAX (g, l->pref_block);
  l->discard_granularity = g;
  l->max_discard = round_down (BACKEND_MAX_DISCARD, g);
  h->max_request = NBDB_MAX_REQUEST;
  if (l->max_block > 0 && l->max_block < h->max_request)
    h->max_request = l->max_block;
  if (l->min_block > 0 && h->max_request >= l->min_block)
    h->max_request -= h->max_request % l->min_block;
  return 0;
}

/* More connections for the pool; a server that refuses them leaves a
 * smaller pool, which still works.
 */
static void
fill_pool (struct nbd_backend *h, const char *uri)
{
  while (h->nr < NBDB_POOL_MAX) {
    struct nbd_conn *c = nbdc_connect (uri, false);

    if (c == NULL)
      return;
    h->conn[h->nr++] = c;
  }
}

struct backend *
backend_nbd_open (const char *uri, bool read_only)
{
  struct nbd_backend *h = calloc (1, sizeof *h);

  if (h == NULL) {
    dc_error ("backend=%s: %m", uri);
    return NULL;
  }
  pthread_mutex_init (&h->lock, NULL);
  pthread_mutex_init (&h->reconnecting, NULL);
  h->b.ops = &nbdb_ops;
  backend_set_identity (&h->b, "nbd", 0, 0, uri);
  h->uri = strdup (uri);
  if (h->uri == NULL) {
    dc_error ("backend=%s: %m", uri);
    goto err;
  }
  h->conn[0] = nbdc_connect (uri, true);
  if (h->conn[0] == NULL)
    goto err;
  h->nr = 1;
  if (nbdb_probe (h, read_only) == -1)
    goto err;
  if (h->b.limits.can_multi_conn)
    fill_pool (h, uri);
  dc_debug ("backend %s: nbd, size %" PRIu64 ", %u connection(s), "
            "granularity %u", uri, h->b.size, h->nr,
            h->b.limits.discard_granularity);
  return &h->b;

 err: {
    int err = errno;
    nbdb_close (&h->b);
    errno = err;
    return NULL;
  }
}
