/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache verifier: connections, asynchronous commands and their
 * completions, all on one thread (libnbd's aio API and one poll loop).
 *
 * A command's blocks are busy from issue until its completion, and the
 * model changes only in the completion callback, so the model's order
 * of effects is the order of completions.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arith.h"
#include "verify.h"

/* Blocks per read when checking the whole disk. */
#define CHECK_BLOCKS 64
/* A drain that makes no progress for this long is a hung server. */
#define STUCK_SECONDS 120
/* Mismatches described in full; the rest are only counted. */
#define MISMATCHES_SHOWN 10

struct conn {
  struct nbd_handle *nbd;
  unsigned inflight;
  bool dead;                    /* the server went away (until_disconnect) */
};

struct op {
  struct verifier *v;
  struct conn *c;
  enum op_type type;
  uint64_t offset, length;      /* bytes, as sent */
  uint64_t first, n;            /* the blocks it touches */
  uint32_t flags;
  uint64_t issued_at;           /* completions before it was issued */
  uint32_t *versions;           /* writes: the version of each block */
  char *buf;                    /* writes, reads */
};

int
io_connect (struct verifier *v)
{
  v->conns = calloc (v->opt.connections, sizeof *v->conns);
  if (v->conns == NULL) {
    perror ("calloc");
    return -1;
  }
  for (unsigned i = 0; i < v->opt.connections; i++) {
    struct nbd_handle *nbd = nbd_create ();

    if (nbd == NULL || nbd_connect_uri (nbd, v->opt.uri) == -1) {
      fprintf (stderr, "verify: %s: %s\n", v->opt.uri, nbd_get_error ());
      nbd_close (nbd);
      return -1;
    }
    v->conns[v->nconns++].nbd = nbd;
  }
  return 0;
}

void
io_disconnect (struct verifier *v)
{
  for (unsigned i = 0; i < v->nconns; i++) {
    nbd_shutdown (v->conns[i].nbd, 0);
    nbd_close (v->conns[i].nbd);
  }
  free (v->conns);
  v->conns = NULL;
  v->nconns = 0;
}

uint64_t
io_size (struct verifier *v)
{
  int64_t size = nbd_get_size (v->conns[0].nbd);

  return size > 0 ? (uint64_t) size : 0;
}

static struct conn *
conn_with_room (struct verifier *v)
{
  for (unsigned k = 0; k < v->nconns; k++) {
    struct conn *c = &v->conns[(v->next_conn + k) % v->nconns];

    if (c->inflight < v->opt.depth && !c->dead && !v->disconnected) {
      v->next_conn = (v->next_conn + k + 1) % v->nconns;
      return c;
    }
  }
  return NULL;
}

bool
io_has_room (struct verifier *v)
{
  if (v->disconnected)
    return false;
  for (unsigned k = 0; k < v->nconns; k++)
    if (v->conns[k].inflight < v->opt.depth && !v->conns[k].dead)
      return true;
  return false;
}

static void
set_busy (struct verifier *v, const struct op *op, bool busy)
{
  for (uint64_t i = op->first; i < op->first + op->n; i++)
    v->model.blk[i].busy = busy;
}

/* The errors of commands on a connection whose server died. */
static bool
disconnect_error (int err)
{
  return err == ENOTCONN || err == ECONNRESET || err == EPIPE ||
         err == ESHUTDOWN;
}

static void
record_error (struct verifier *v, const struct op *op, int err)
{
  if (v->opt.until_disconnect && disconnect_error (err)) {
    /* Such a command may or may not have run: the model says so. */
    v->disconnected = true;
    v->disconnect_errors++;
    return;
  }
  v->errors[op->type][MIN (err, ERRNO_SLOTS - 1)]++;
  if (v->opt.expect_errors ||
      (v->opt.allow_enospc && op->type == OP_WRITE && err == ENOSPC))
    return;
  fprintf (stderr, "verify: %s [%" PRIu64 ", +%" PRIu64 ") failed: %s\n",
           op_names[op->type], op->offset, op->length, strerror (err));
  v->failed = true;
}

static void
check_read (struct verifier *v, const struct op *op)
{
  for (uint64_t i = 0; i < op->n; i++) {
    FILE *fp = v->mismatches < MISMATCHES_SHOWN ? stderr : NULL;

    if (!model_checkable (&v->model, op->first + i, v->crash_check)) {
      if (v->crash_check)
        v->crash_anything++;
      else
        v->unchecked++;
    }
    if (!model_check_block (&v->model, op->first + i,
                            op->buf + i * BLOCK_SIZE, v->crash_check, fp)) {
      v->mismatches++;
      v->failed = true;
    }
    if (v->crash_check) {
      model_adopt_block (&v->model, op->first + i, op->buf + i * BLOCK_SIZE);
    }
  }
  v->blocks_checked += op->n;
}

/* The completion callback: the command's effect enters the model. */
static int
op_done (void *opaque, int *error)
{
  struct op *op = opaque;
  struct verifier *v = op->v;
  int err = *error;

  op->c->inflight--;
  v->inflight--;
  v->count[op->type]++;
  if (err)
    record_error (v, op, err);
  switch (op->type) {
  case OP_WRITE:
  case OP_ZERO:
  case OP_TRIM:
    model_complete (&v->model, op->type, op->first, op->n, op->versions,
                    op->flags & LIBNBD_CMD_FLAG_FUA, err);
    if (!err)
      workload_note (v, op->type, op->first, op->n);
    break;
  case OP_FLUSH:
    if (!err)
      model_flushed (&v->model, op->issued_at);
    break;
  case OP_READ:
  case OP_CHECK:
    if (!err)
      check_read (v, op);
    break;
  default:
    break;
  }
  return 1;                     /* retire the command */
}

/* Called once the command is retired, or at once if it was refused. */
static void
op_free (void *opaque)
{
  struct op *op = opaque;

  set_busy (op->v, op, false);
  free (op->versions);
  free (op->buf);
  free (op);
}

/* Allocate op and fill the data of a write, handing out versions. */
static struct op *
op_new (struct verifier *v, const struct op_choice *ch)
{
  struct op *op = calloc (1, sizeof *op);

  if (op == NULL)
    return NULL;
  *op = (struct op) {
    .v = v, .type = ch->type, .offset = ch->offset, .length = ch->length,
    .flags = ch->flags, .issued_at = v->model.seq,
    .first = ch->offset / BLOCK_SIZE,
    .n = ch->length ? (ch->offset + ch->length - 1) / BLOCK_SIZE + 1
                      - ch->offset / BLOCK_SIZE : 0,
  };
  if (ch->type == OP_WRITE || ch->type == OP_READ || ch->type == OP_CHECK) {
    op->buf = malloc (ch->length);
    if (op->buf == NULL)
      goto nomem;
  }
  if (ch->type == OP_WRITE) {
    op->versions = malloc (op->n * sizeof *op->versions);
    if (op->versions == NULL)
      goto nomem;
    for (uint64_t i = 0; i < op->n; i++) {
      struct blk *b = &v->model.blk[op->first + i];

      op->versions[i] = ++b->next_version;
      pattern_fill (op->buf + i * BLOCK_SIZE, op->first + i, op->versions[i]);
    }
  }
  return op;

 nomem:
  free (op->buf);
  free (op);
  return NULL;
}

static int64_t
submit (struct op *op)
{
  struct nbd_handle *nbd = op->c->nbd;
  nbd_completion_callback cb = {
    .callback = op_done, .user_data = op, .free = op_free,
  };

  switch (op->type) {
  case OP_WRITE:
    return nbd_aio_pwrite (nbd, op->buf, op->length, op->offset, cb, op->flags);
  case OP_TRIM:
    return nbd_aio_trim (nbd, op->length, op->offset, cb, op->flags);
  case OP_ZERO:
    return nbd_aio_zero (nbd, op->length, op->offset, cb, op->flags);
  case OP_FLUSH:
    return nbd_aio_flush (nbd, cb, 0);
  default:
    return nbd_aio_pread (nbd, op->buf, op->length, op->offset, cb, 0);
  }
}

int
io_issue (struct verifier *v, const struct op_choice *ch)
{
  struct conn *c = conn_with_room (v);
  struct op *op;

  if (c == NULL)
    return 0;
  op = op_new (v, ch);
  if (op == NULL) {
    perror ("verify: malloc");
    return -1;
  }
  op->c = c;
  set_busy (v, op, true);
  /* Counted before submitting, in case it completes at once. */
  c->inflight++;
  v->inflight++;
  if (submit (op) == -1) {
    /* libnbd has already called op_free. */
    fprintf (stderr, "verify: cannot issue %s: %s\n", op_names[ch->type],
             nbd_get_error ());
    c->inflight--;
    v->inflight--;
    if (v->opt.until_disconnect && nbd_aio_is_dead (c->nbd)) {
      c->dead = true;           /* it never reached a live server */
      v->disconnected = true;
      return 0;
    }
    return -1;
  }
  if (ch->type != OP_CHECK)
    v->issued++;
  return 0;
}

/* Move one connection's state machine along after poll said so. */
static int
notify (struct verifier *v, unsigned i, short revents)
{
  struct nbd_handle *nbd = v->conns[i].nbd;
  unsigned dir = nbd_aio_get_direction (nbd);
  int r = 0;

  if ((dir & LIBNBD_AIO_DIRECTION_READ) &&
      (revents & (POLLIN | POLLHUP | POLLERR)))
    r = nbd_aio_notify_read (nbd);
  else if ((dir & LIBNBD_AIO_DIRECTION_WRITE) &&
           (revents & (POLLOUT | POLLHUP | POLLERR)))
    r = nbd_aio_notify_write (nbd);
  if (r == -1 || nbd_aio_is_dead (nbd) || nbd_aio_is_closed (nbd)) {
    fprintf (stderr, "verify: connection %u: %s\n", i,
             r == -1 ? nbd_get_error () : "the server closed it");
    if (!v->opt.until_disconnect)
      return -1;
    /* libnbd has failed its commands in flight (ENOTCONN). */
    v->conns[i].dead = true;
    v->disconnected = true;
  }
  return 0;
}

int
io_poll (struct verifier *v, int timeout_ms)
{
  struct pollfd fds[MAX_CONNECTIONS];

  for (unsigned i = 0; i < v->nconns; i++) {
    unsigned dir = nbd_aio_get_direction (v->conns[i].nbd);

    /* poll ignores a negative fd: a dead connection's. */
    fds[i].fd = v->conns[i].dead ? -1 : nbd_aio_get_fd (v->conns[i].nbd);
    fds[i].events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
                    ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
    fds[i].revents = 0;
  }
  if (poll (fds, v->nconns, timeout_ms) == -1) {
    if (errno == EINTR)
      return 0;
    perror ("verify: poll");
    return -1;
  }
  for (unsigned i = 0; i < v->nconns; i++)
    if (fds[i].revents && notify (v, i, fds[i].revents) == -1)
      return -1;
  return 0;
}

static bool
all_dead (const struct verifier *v)
{
  for (unsigned i = 0; i < v->nconns; i++)
    if (!v->conns[i].dead)
      return false;
  return true;
}

int
io_drain (struct verifier *v)
{
  time_t last_progress = time (NULL);
  unsigned before = v->inflight;

  while (v->inflight > 0) {
    if (io_poll (v, 1000) == -1)
      return -1;
    if (v->disconnected && all_dead (v) && v->inflight > 0) {
      fprintf (stderr, "verify: %u commands never completed on the dead "
               "connections\n", v->inflight);
      return -1;
    }
    if (v->inflight != before) {
      before = v->inflight;
      last_progress = time (NULL);
    }
    else if (time (NULL) - last_progress > STUCK_SECONDS) {
      fprintf (stderr, "verify: %u commands made no progress for %d s\n",
               v->inflight, STUCK_SECONDS);
      return -1;
    }
  }
  return 0;
}

int
io_check_all (struct verifier *v)
{
  uint64_t next = 0, nblocks = v->model.nblocks;

  if (io_drain (v) == -1)
    return -1;
  while (next < nblocks && !v->disconnected) {
    while (next < nblocks && io_has_room (v)) {
      uint64_t n = MIN (CHECK_BLOCKS, nblocks - next);
      struct op_choice ch = {
        .type = OP_CHECK, .offset = next * BLOCK_SIZE, .length = n * BLOCK_SIZE,
      };

      if (io_issue (v, &ch) == -1)
        return -1;
      next += n;
    }
    if (io_poll (v, 1000) == -1)
      return -1;
  }
  return io_drain (v);
}
