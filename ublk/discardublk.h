/* SPDX-License-Identifier: BSD-3-Clause */
/* discardublk: the ublk front-end.  The engine served as a block device,
 * /dev/ublkbN, by the kernel's ublk driver (drivers/block/ublk_drv.c,
 * Linux 6.0+): requests arrive as io_uring command completions, with no
 * socket, FUSE or loop device in between.
 *
 * One context struct, struct dublk, holds the front-end's state: main.c
 * owns it, args.c fills it from the command line, ctrl.c talks to
 * /dev/ublk-control, params.c describes the volume to the kernel, and
 * queue.c runs one thread per hardware queue, each handing requests to
 * io.c.  Functions returning int return 0 or -1 with errno set, the
 * error reported once with dc_error.
 */
#ifndef DISCARDUBLK_H
#define DISCARDUBLK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <linux/ublk_cmd.h>
#include <liburing.h>

#include "service.h"
#include "volume.h"

#define DUBLK_CONTROL "/dev/ublk-control"

/* Largest read or write: 512 KiB, ublksrv's default; each tag of each
 * queue owns a buffer this large.
 */
#define DUBLK_MAX_IO (512 * 1024)
#define DUBLK_DEFAULT_DEPTH 64
#define DUBLK_DEFAULT_QUEUES 1
#define DUBLK_DEFAULT_WORKERS 4

/* The control device and its ring (ctrl.c). */
struct dublk_ctrl {
  int fd;                           /* /dev/ublk-control, -1: closed */
  struct io_uring ring;             /* SQE128, for the control commands */
  bool ring_ready;
};

struct dublk;
struct dublk_workers;

/* One hardware queue: its thread owns the ring (the kernel binds the
 * queue to the task that fetches its first request).
 */
struct dublk_queue {
  struct dublk *d;
  unsigned id;
  pthread_t thread;
  bool thread_started;
  struct io_uring ring;
  bool ring_ready;
  const struct ublksrv_io_desc *iods;  /* the kernel's descriptors, mmapped */
  size_t iods_len;
  char *bufs;                       /* depth buffers of DUBLK_MAX_IO */
  unsigned live;                    /* tags the kernel has not aborted */
  struct dublk_workers *workers;    /* NULL: the queue thread serves */
  unsigned handed;                  /* tags with the workers */
};

/* Tag tag's buffer: where a write's data is, and a read's goes. */
static inline char *
dublk_queue_buf (struct dublk_queue *q, unsigned tag)
{
  return q->bufs + (size_t) tag * DUBLK_MAX_IO;
}

struct dublk {
  /* From the command line (args.c). */
  struct service_config cfg;
  int dev_id;                       /* --id=N; -1: the kernel picks */
  bool recover;                     /* --recover: take a quiesced device over */
  bool keep;                        /* --keep: leave the device at exit */
  bool foreground;
  unsigned nr_queues;
  unsigned depth;
  unsigned nr_workers;              /* per queue; 0: none */

  /* Set before the queues start, then only read. */
  struct service *service;
  struct volume *volume;
  struct dublk_ctrl ctrl;
  struct ublksrv_ctrl_dev_info info;  /* as the kernel holds it */
  int cdev_fd;                      /* /dev/ublkcN */
  int stop_fd;                      /* eventfd: the queues stop taking requests */
  struct dublk_queue *queues;

  /* Queue start-up: how many have armed their tags, and whether one
   * failed (the device must not be started then).
   */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned queues_armed;
  unsigned queues_failed;
};

/* An io_uring command for fd with its payload (a ublksrv_ctrl_cmd or
 * ublksrv_io_cmd) in the second half of a 128-byte entry.  The next
 * entry of ring, or NULL (reported) if it is full.
 */
static inline struct io_uring_sqe *
dublk_prep_cmd (struct io_uring *ring, int fd, unsigned op,
                const void *payload, size_t len, uint64_t user_data)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe (ring);
  char *cmd;

  if (sqe == NULL)
    return NULL;
  cmd = (char *) sqe + offsetof (struct io_uring_sqe, cmd);
  memset (sqe, 0, sizeof *sqe);
  memset (cmd, 0, 80);
  memcpy (cmd, payload, len);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  sqe->cmd_op = op;
  sqe->user_data = user_data;
  return sqe;
}

/* args.c: parse argv into d.  0 to go on, 1 when there is nothing more
 * to do (--help, --version), -1 on bad input (reported).
 */
extern int dublk_parse_args (struct dublk *d, int argc, char *argv[]);
extern void dublk_free_args (struct dublk *d);

/* ctrl.c: the control commands, each one io_uring command on
 * /dev/ublk-control.  dublk_ctrl_open says what to do on a kernel
 * without ublk.
 */
extern int dublk_ctrl_open (struct dublk_ctrl *c);
extern int dublk_ctrl_ring (struct dublk_ctrl *c);
extern void dublk_ctrl_close (struct dublk_ctrl *c);
/* ADD_DEV: info in (dev_id, queues, depth, flags), out as the kernel set it. */
extern int dublk_ctrl_add (struct dublk_ctrl *c,
                           struct ublksrv_ctrl_dev_info *info);
extern int dublk_ctrl_get_info (struct dublk_ctrl *c, unsigned dev_id,
                                struct ublksrv_ctrl_dev_info *info);
extern int dublk_ctrl_set_params (struct dublk_ctrl *c, unsigned dev_id,
                                  struct ublk_params *p);
extern int dublk_ctrl_get_params (struct dublk_ctrl *c, unsigned dev_id,
                                  struct ublk_params *p);
/* START_DEV and END_USER_RECOVERY return once every queue has fetched
 * all its tags.
 */
extern int dublk_ctrl_start (struct dublk_ctrl *c, unsigned dev_id,
                             pid_t pid);
extern int dublk_ctrl_stop (struct dublk_ctrl *c, unsigned dev_id);
extern int dublk_ctrl_del (struct dublk_ctrl *c, unsigned dev_id);
/* START_USER_RECOVERY, retried while the old server is still going
 * away (EBUSY), up to timeout_ms.
 */
extern int dublk_ctrl_start_recovery (struct dublk_ctrl *c, unsigned dev_id,
                                      unsigned timeout_ms);
extern int dublk_ctrl_end_recovery (struct dublk_ctrl *c, unsigned dev_id,
                                    pid_t pid);

/* params.c: the device's parameters from the volume: size, block sizes,
 * FLUSH/FUA, discard and write-zeroes limits.
 */
extern void dublk_params_fill (const struct dublk *d, struct ublk_params *p);
/* The device a --recover takes over must be the one this volume made. */
extern int dublk_params_check (const struct dublk *d,
                               const struct ublk_params *p);

/* queue.c: start every queue's thread and wait until each has armed its
 * tags (or one failed); stop them (stop_fd) and join.
 */
extern int dublk_queues_start (struct dublk *d);
extern void dublk_queues_stop (struct dublk *d);

/* workers.c: threads that serve a queue's requests, so that a slow
 * backend has several in flight.  start: NULL on failure (reported).
 * submit: serve tag.  The eventfd (fd) is readable when tags are done;
 * take copies them out with their results (at most the queue's depth)
 * and returns how many.  stop: the workers joined (NULL allowed).
 */
extern struct dublk_workers *dublk_workers_start (struct dublk_queue *q);
extern int dublk_workers_fd (const struct dublk_workers *w);
extern void dublk_workers_submit (struct dublk_workers *w, unsigned tag);
extern unsigned dublk_workers_take (struct dublk_workers *w, unsigned *tags,
                                    int *results);
extern void dublk_workers_stop (struct dublk_workers *w);

/* io.c: serve one request through the volume.  Returns the bytes done
 * (what COMMIT_AND_FETCH reports for reads and writes) or -errno.
 */
extern int dublk_io (struct volume *v, const struct ublksrv_io_desc *iod,
                     void *buf);

#endif /* DISCARDUBLK_H */
