/* SPDX-License-Identifier: BSD-3-Clause */
/* discardublk: the queues.  Each hardware queue has one thread, which
 * owns an io_uring of 128-byte entries: it maps the queue's request
 * descriptors from /dev/ublkcN, arms every tag with FETCH_REQ (handing
 * the kernel that tag's buffer), then for each completion serves the
 * request (io.c) and answers it with COMMIT_AND_FETCH_REQ, which also
 * re-arms the tag.
 *
 * With workers (workers.c), the queue thread hands them the requests and
 * commits what they finished when their eventfd, which its ring polls,
 * says so.
 *
 * A tag completes with UBLK_IO_RES_ABORT when the device is stopped;
 * the thread ends when every tag has, or when stop_fd (an eventfd it
 * polls) is written: then the ring goes away with the tags still armed,
 * which is how the kernel learns the server is gone and, with user
 * recovery, holds I/O for the next one.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "discardublk.h"
#include "log.h"

/* user_data of the stop_fd and workers' polls; tags are below
 * UBLK_MAX_QUEUE_DEPTH.
 */
#define STOP_TAG UINT64_MAX
#define DONE_TAG (UINT64_MAX - 1)

static int
queue_io_cmd (struct dublk_queue *q, unsigned op, unsigned tag, int result)
{
  struct ublksrv_io_cmd cmd = {
    .q_id = q->id, .tag = tag, .result = result,
    .addr = (uintptr_t) dublk_queue_buf (q, tag),
  };

  if (dublk_prep_cmd (&q->ring, q->d->cdev_fd, op, &cmd, sizeof cmd,
                      tag) == NULL) {
    /* The ring has an entry per tag and one for stop_fd: cannot happen. */
    dc_error ("ublk queue %u: io_uring full", q->id);
    errno = EBUSY;
    return -1;
  }
  return 0;
}

/* Each queue's descriptors sit at a fixed offset in /dev/ublkcN, as
 * many as the largest depth the driver allows.
 */
static int
map_iods (struct dublk_queue *q)
{
  long page = sysconf (_SC_PAGESIZE);
  size_t desc = sizeof (struct ublksrv_io_desc);
  size_t stride = (UBLK_MAX_QUEUE_DEPTH * desc + page - 1) / page * page;
  void *p;

  q->iods_len = (q->d->info.queue_depth * desc + page - 1) / page * page;
  p = mmap (NULL, q->iods_len, PROT_READ, MAP_SHARED | MAP_POPULATE,
            q->d->cdev_fd, UBLKSRV_CMD_BUF_OFFSET + (off_t) q->id * stride);
  if (p == MAP_FAILED) {
    dc_error ("ublk queue %u: mmap of the descriptors: %m", q->id);
    return -1;
  }
  q->iods = p;
  return 0;
}

static int
queue_setup (struct dublk_queue *q)
{
  unsigned depth = q->d->info.queue_depth;
  int r;

  if (map_iods (q) == -1)
    return -1;
  q->bufs = aligned_alloc (4096, (size_t) depth * DUBLK_MAX_IO);
  if (q->bufs == NULL) {
    dc_error ("ublk queue %u: %u buffers of %d bytes: %m", q->id, depth,
              DUBLK_MAX_IO);
    return -1;
  }
  if (q->d->nr_workers) {
    q->workers = dublk_workers_start (q);
    if (q->workers == NULL)
      return -1;
  }
  /* A commit per tag, and the two polls. */
  r = io_uring_queue_init (depth + 2, &q->ring, IORING_SETUP_SQE128);
  if (r < 0) {
    errno = -r;
    dc_error ("ublk queue %u: io_uring_queue_init: %m", q->id);
    return -1;
  }
  q->ring_ready = true;
  return 0;
}

static int
queue_poll (struct dublk_queue *q, int fd, uint64_t user_data)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe (&q->ring);

  if (sqe == NULL) {
    dc_error ("ublk queue %u: io_uring full", q->id);
    errno = EBUSY;
    return -1;
  }
  memset (sqe, 0, sizeof *sqe);
  io_uring_prep_poll_add (sqe, fd, POLLIN);
  sqe->user_data = user_data;
  return 0;
}

/* Arm every tag and the polls in one submission. */
static int
queue_arm (struct dublk_queue *q)
{
  unsigned tag;
  int r;

  for (tag = 0; tag < q->d->info.queue_depth; tag++)
    if (queue_io_cmd (q, UBLK_IO_FETCH_REQ, tag, -1) == -1)
      return -1;
  if (queue_poll (q, q->d->stop_fd, STOP_TAG) == -1 ||
      (q->workers &&
       queue_poll (q, dublk_workers_fd (q->workers), DONE_TAG) == -1))
    return -1;
  r = io_uring_submit (&q->ring);
  if (r < 0) {
    errno = -r;
    dc_error ("ublk queue %u: FETCH_REQ: %m", q->id);
    return -1;
  }
  q->live = q->d->info.queue_depth;
  return 0;
}

/* The workers have finished some: answer them, poll again. */
static bool
queue_commit_done (struct dublk_queue *q)
{
  unsigned tags[UBLK_MAX_QUEUE_DEPTH];
  int results[UBLK_MAX_QUEUE_DEPTH];
  unsigned i, n = dublk_workers_take (q->workers, tags, results);

  q->handed -= n;

  for (i = 0; i < n; i++)
    if (queue_io_cmd (q, UBLK_IO_COMMIT_AND_FETCH_REQ, tags[i],
                      results[i]) == -1)
      return false;
  return queue_poll (q, dublk_workers_fd (q->workers), DONE_TAG) == 0;
}

/* A request alone (the only one in this batch, none with the workers)
 * is served here: handing it over costs two context switches and gains
 * nothing.  Measured in the 6.12 guest (TCG, one vCPU, tmpfs backend):
 * always handing over made QD1 a third slower than serving here.
 */
static bool
queue_request (struct dublk_queue *q, unsigned tag, unsigned batch)
{
  int result;

  if (q->workers && (batch > 1 || q->handed > 0)) {
    dublk_workers_submit (q->workers, tag);
    q->handed++;
    return true;
  }
  result = dublk_io (q->d->volume, &q->iods[tag], dublk_queue_buf (q, tag));
  return queue_io_cmd (q, UBLK_IO_COMMIT_AND_FETCH_REQ, tag, result) == 0;
}

/* One completion of a batch holding batch requests: false when the
 * queue is done.
 */
static bool
queue_complete (struct dublk_queue *q, const struct io_uring_cqe *cqe,
                unsigned batch)
{
  unsigned tag = cqe->user_data;

  if (cqe->user_data == STOP_TAG)
    return false;
  if (cqe->user_data == DONE_TAG)
    return queue_commit_done (q);
  if (cqe->res == UBLK_IO_RES_OK)
    return queue_request (q, tag, batch);
  if (cqe->res != UBLK_IO_RES_ABORT) {
    errno = -cqe->res;
    dc_error ("ublk queue %u tag %u: %m", q->id, tag);
  }
  return --q->live > 0;
}

/* How many of the completions ready are requests. */
static unsigned
queue_batch (struct dublk_queue *q)
{
  struct io_uring_cqe *cqe;
  unsigned head, n = 0;

  io_uring_for_each_cqe (&q->ring, head, cqe)
    if (cqe->user_data < DONE_TAG && cqe->res == UBLK_IO_RES_OK)
      n++;
  return n;
}

/* Serve until every tag is aborted or stop_fd is written. */
static void
queue_serve (struct dublk_queue *q)
{
  struct io_uring_cqe *cqe;
  unsigned head, n, batch;
  bool go = true;
  int r;

  while (go) {
    r = io_uring_submit_and_wait (&q->ring, 1);
    if (r < 0 && r != -EINTR) {
      errno = -r;
      dc_error ("ublk queue %u: io_uring: %m", q->id);
      return;
    }
    n = 0;
    batch = queue_batch (q);
    io_uring_for_each_cqe (&q->ring, head, cqe) {
      n++;
      if (!queue_complete (q, cqe, batch))
        go = false;
    }
    io_uring_cq_advance (&q->ring, n);
  }
  /* Answers to the requests served last. */
  io_uring_submit (&q->ring);
}

static void
queue_teardown (struct dublk_queue *q)
{
  dublk_workers_stop (q->workers);
  q->workers = NULL;
  if (q->ring_ready)
    io_uring_queue_exit (&q->ring);
  q->ring_ready = false;
  if (q->iods)
    munmap ((void *) q->iods, q->iods_len);
  q->iods = NULL;
  free (q->bufs);
  q->bufs = NULL;
}

static void
queue_armed (struct dublk *d, bool ok)
{
  pthread_mutex_lock (&d->lock);
  if (ok)
    d->queues_armed++;
  else
    d->queues_failed++;
  pthread_cond_broadcast (&d->cond);
  pthread_mutex_unlock (&d->lock);
}

static void *
queue_thread (void *arg)
{
  struct dublk_queue *q = arg;
  bool ok = queue_setup (q) == 0 && queue_arm (q) == 0;

  queue_armed (q->d, ok);
  if (ok)
    queue_serve (q);
  queue_teardown (q);
  return NULL;
}

/* The threads inherit the caller's signal mask: main.c blocks the
 * signals it waits for before this.
 */
int
dublk_queues_start (struct dublk *d)
{
  unsigned i, n = d->info.nr_hw_queues;
  int err;

  d->queues = calloc (n, sizeof *d->queues);
  if (d->queues == NULL) {
    dc_error ("calloc: %m");
    return -1;
  }
  for (i = 0; i < n; i++) {
    d->queues[i].d = d;
    d->queues[i].id = i;
    err = pthread_create (&d->queues[i].thread, NULL, queue_thread,
                          &d->queues[i]);
    if (err) {
      errno = err;
      dc_error ("pthread_create: %m");
      return -1;
    }
    d->queues[i].thread_started = true;
  }
  pthread_mutex_lock (&d->lock);
  while (d->queues_armed + d->queues_failed < n)
    pthread_cond_wait (&d->cond, &d->lock);
  pthread_mutex_unlock (&d->lock);
  if (d->queues_failed) {
    errno = EIO;
    return -1;
  }
  return 0;
}

void
dublk_queues_stop (struct dublk *d)
{
  uint64_t one = 1;
  unsigned i;

  if (d->queues == NULL)
    return;
  if (write (d->stop_fd, &one, sizeof one) != sizeof one)
    dc_error ("eventfd write: %m");
  for (i = 0; i < d->info.nr_hw_queues; i++)
    if (d->queues[i].thread_started)
      pthread_join (d->queues[i].thread, NULL);
  free (d->queues);
  d->queues = NULL;
}
