/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the NBD backend, another NBD server reached through
 * libnbd's synchronous API.  Functions are named nbdb_* (nbd_* is
 * libnbd's namespace).
 *
 * Concurrency: a libnbd handle is thread-safe, but a synchronous call
 * holds the handle's lock until its reply, so one handle runs one
 * request at a time and a slow TRIM would stall every read behind it.
 * When the server advertises multi-conn (a flush on one connection
 * covers writes made on all of them) we open a small pool of
 * connections and each call takes a free one, waiting only when all
 * are busy.  Without multi-conn, a flush on one connection would not
 * cover the others, so there is a single connection and calls queue on
 * it.  This is simpler than driving the aio API from a dispatcher
 * thread, and the pool size bounds the requests in flight.
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

/* Take a free connection, waiting while all are busy. */
static unsigned
take_connection (struct nbd_backend *h)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
  for (;;) {
    unsigned i;

    for (i = 0; i < h->nr; ++i)
      if (!h->busy[i]) {
        h->busy[i] = true;
        return i;
      }
    pthread_cond_wait (&h->freed, &h->lock);
  }
}

static void
give_back (struct nbd_backend *h, unsigned i)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
  h->busy[i] = false;
  pthread_cond_signal (&h->freed);
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

static int
run_cmd (struct nbd_handle *nbd, enum nbdb_cmd cmd, void *buf,
         uint64_t count, uint64_t offset, uint32_t flags)
{
  switch (cmd) {
  case CMD_PREAD: return nbd_pread (nbd, buf, count, offset, flags);
  case CMD_PWRITE: return nbd_pwrite (nbd, buf, count, offset, flags);
  case CMD_ZERO: return nbd_zero (nbd, count, offset, flags);
  case CMD_TRIM: return nbd_trim (nbd, count, offset, flags);
  case CMD_FLUSH: return nbd_flush (nbd, flags);
  case CMD_BLOCK_STATUS:
    return nbd_block_status (nbd, count, offset,
                             *(nbd_extent_callback *) buf, flags);
  }
  abort ();
}

/* Send on slot i, reconnecting first if its connection was lost, and
 * once more on a new connection if it is lost during the request.
 * Returns 0; 1 (errno EIO, reported) if no connection could be had; or
 * -1 with libnbd's error for this thread, the server's answer.
 */
static int
send_on (struct nbd_backend *h, unsigned i, enum nbdb_cmd cmd, void *buf,
         uint64_t count, uint64_t offset, uint32_t flags)
{
  for (int attempt = 0; attempt < 2; attempt++) {
    if (nbdc_ensure (h, i) == -1)
      return 1;
    if (run_cmd (h->nbd[i], cmd, buf, count, offset, flags) == 0)
      return 0;
    if (nbd_get_errno () == ESHUTDOWN)
      h->leaving[i] = true;     /* not run: the server is going away */
    else if (!nbdc_lost (h->nbd[i]))
      return -1;
    nbdc_note_lost (h, i);
  }
  errno = EIO;
  return 1;
}

/* One request on one connection.  An unsupported trim returns
 * EOPNOTSUPP silently; other errors are reported.  A lost server is
 * EIO to the caller, whatever libnbd said (a client of ours would turn
 * ENOTCONN or libnbd's EINVAL for a dead handle into EINVAL).
 */
static int
issue (struct nbd_backend *h, enum nbdb_cmd cmd, void *buf,
       uint64_t count, uint64_t offset, uint32_t flags)
{
  unsigned i = take_connection (h);
  int r = send_on (h, i, cmd, buf, count, offset, flags);

  if (r == -1) {
    errno = last_errno ();
    if (cmd == CMD_TRIM && trim_unsupported (h, errno))
      errno = EOPNOTSUPP;
    else
      dc_error ("backend %s: %s: %s", h->b.identity.name,
                cmd_names[cmd], last_error ());
  }
  else if (r == 1)
    dc_debug ("backend %s: %s: no connection to the server",
              h->b.identity.name, cmd_names[cmd]);
  else if ((cmd == CMD_PWRITE || cmd == CMD_ZERO) &&
           !(flags & LIBNBD_CMD_FLAG_FUA))
    nbdc_write_done (h);
  give_back (h, i);
  return r == 0 ? 0 : -1;
}

/* A request cut into chunks of at most max bytes (buf, when not NULL,
 * advances with them).
 */
static int
issue_chunked (struct nbd_backend *h, enum nbdb_cmd cmd, char *buf,
               uint64_t count, uint64_t offset, uint32_t flags, uint64_t max)
{
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
  if (!backend_discard_align (b, &offset, &length))
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

  for (i = 0; i < h->nr; ++i) {
    if (nbd_shutdown (h->nbd[i], 0) == -1)
      dc_debug ("backend %s: shutdown: %s", b->identity.name, last_error ());
    nbd_close (h->nbd[i]);
  }
  pthread_cond_destroy (&h->freed);
  pthread_mutex_destroy (&h->lock);
  free (h->uri);
  free (h);
}

static const struct backend_ops nbdb_ops = {
  .kind = "nbd",
  .pread = nbdb_pread,
  .pwrite = nbdb_pwrite,
  .zero = nbdb_zero,
  .discard = nbdb_discard,
  .flush = nbdb_flush,
  .extents = nbdb_extents,
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
  struct nbd_handle *nbd = h->nbd[0];
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
    struct nbd_handle *nbd = nbdc_connect (uri, false);

    if (nbd == NULL)
      return;
    h->nbd[h->nr++] = nbd;
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
  pthread_cond_init (&h->freed, NULL);
  h->b.ops = &nbdb_ops;
  backend_set_identity (&h->b, "nbd", 0, 0, uri);
  h->uri = strdup (uri);
  if (h->uri == NULL) {
    dc_error ("backend=%s: %m", uri);
    goto err;
  }
  h->nbd[0] = nbdc_connect (uri, true);
  if (h->nbd[0] == NULL)
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
