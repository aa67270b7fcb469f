/* SPDX-License-Identifier: BSD-3-Clause */
/* discardublk: the control commands.  Each is one IORING_OP_URING_CMD on
 * /dev/ublk-control in a ring of 128-byte entries, whose extra 80 bytes
 * carry struct ublksrv_ctrl_cmd; the completion's res is the answer.
 *
 * The opcodes are the plain ones of Linux 6.0/6.1's UAPI header
 * (Debian 12's linux-libc-dev), not the ioctl-encoded ones of 6.3+: the
 * kernels this serves accept them (6.12's CONFIG_BLKDEV_UBLK_LEGACY_OPCODES,
 * set in Debian's config), and they also work on 6.1 and 6.2.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "discardublk.h"
#include "log.h"

static const char *
cmd_name (unsigned op)
{
  switch (op) {
  case UBLK_CMD_ADD_DEV: return "ADD_DEV";
  case UBLK_CMD_DEL_DEV: return "DEL_DEV";
  case UBLK_CMD_START_DEV: return "START_DEV";
  case UBLK_CMD_STOP_DEV: return "STOP_DEV";
  case UBLK_CMD_SET_PARAMS: return "SET_PARAMS";
  case UBLK_CMD_GET_PARAMS: return "GET_PARAMS";
  case UBLK_CMD_GET_DEV_INFO: return "GET_DEV_INFO";
  case UBLK_CMD_START_USER_RECOVERY: return "START_USER_RECOVERY";
  case UBLK_CMD_END_USER_RECOVERY: return "END_USER_RECOVERY";
  default: return "command";
  }
}

int
dublk_ctrl_open (struct dublk_ctrl *c)
{
  c->ring_ready = false;
  c->fd = open (DUBLK_CONTROL, O_RDWR | O_CLOEXEC);
  if (c->fd == -1) {
    if (errno == ENOENT || errno == ENODEV || errno == ENXIO)
      dc_error ("%s: %m: this kernel has no ublk driver loaded (load it with "
                "'modprobe ublk_drv'; it needs Linux 6.0 or later built with "
                "CONFIG_BLK_DEV_UBLK, and 6.1 or later for --recover)",
                DUBLK_CONTROL);
    else
      dc_error ("%s: %m (discardublk needs root or CAP_SYS_ADMIN)",
                DUBLK_CONTROL);
    return -1;
  }
  return 0;
}

/* After any fork: a ring is not shared across one. */
int
dublk_ctrl_ring (struct dublk_ctrl *c)
{
  int r = io_uring_queue_init (4, &c->ring, IORING_SETUP_SQE128);

  if (r < 0) {
    errno = -r;
    dc_error ("io_uring_queue_init: %m: ublk needs io_uring (Linux 6.0+, "
              "not disabled by kernel.io_uring_disabled)");
    return -1;
  }
  c->ring_ready = true;
  return 0;
}

void
dublk_ctrl_close (struct dublk_ctrl *c)
{
  if (c->ring_ready)
    io_uring_queue_exit (&c->ring);
  c->ring_ready = false;
  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
}

/* Send one command and wait for its answer: res >= 0, or -1 with errno
 * the kernel's.  Reported unless quiet_errno is the error.
 */
static int
ctrl_cmd (struct dublk_ctrl *c, unsigned op, const struct ublksrv_ctrl_cmd *cmd,
          int quiet_errno)
{
  struct io_uring_cqe *cqe;
  int r;

  /* One command at a time: the ring is never full. */
  if (dublk_prep_cmd (&c->ring, c->fd, op, cmd, sizeof *cmd, 0) == NULL) {
    dc_error ("ublk %s: io_uring full", cmd_name (op));
    errno = EBUSY;
    return -1;
  }
  r = io_uring_submit_and_wait (&c->ring, 1);
  if (r >= 0)
    r = io_uring_wait_cqe (&c->ring, &cqe);
  if (r < 0) {
    errno = -r;
    dc_error ("ublk %s: io_uring: %m", cmd_name (op));
    return -1;
  }
  r = cqe->res;
  io_uring_cqe_seen (&c->ring, cqe);
  if (r < 0) {
    errno = -r;
    if (errno != quiet_errno)
      dc_error ("ublk %s on device %u: %m", cmd_name (op), cmd->dev_id);
    return -1;
  }
  return r;
}

static struct ublksrv_ctrl_cmd
make_cmd (unsigned dev_id, void *addr, size_t len)
{
  return (struct ublksrv_ctrl_cmd) {
    .dev_id = dev_id,
    .queue_id = (__u16) -1,           /* ADD_DEV insists; others ignore it */
    .addr = (uintptr_t) addr,
    .len = len,
  };
}

/* A command that passes the kernel a buffer, or takes one back. */
static int
buf_cmd (struct dublk_ctrl *c, unsigned op, unsigned dev_id, void *buf,
         size_t len, int quiet_errno)
{
  struct ublksrv_ctrl_cmd cmd = make_cmd (dev_id, buf, len);

  return ctrl_cmd (c, op, &cmd, quiet_errno) < 0 ? -1 : 0;
}

int
dublk_ctrl_add (struct dublk_ctrl *c, struct ublksrv_ctrl_dev_info *info)
{
  if (buf_cmd (c, UBLK_CMD_ADD_DEV, info->dev_id, info, sizeof *info,
               EEXIST) == -1) {
    if (errno == EEXIST)
      dc_error ("ublk device %u exists already: take it over with "
                "--recover --id=%u, or choose another --id", info->dev_id,
                info->dev_id);
    return -1;
  }
  return 0;
}

int
dublk_ctrl_get_info (struct dublk_ctrl *c, unsigned dev_id,
                     struct ublksrv_ctrl_dev_info *info)
{
  memset (info, 0, sizeof *info);
  if (buf_cmd (c, UBLK_CMD_GET_DEV_INFO, dev_id, info, sizeof *info,
               ENODEV) == -1) {
    if (errno == ENODEV)
      dc_error ("--recover: there is no ublk device %u", dev_id);
    return -1;
  }
  return 0;
}

int
dublk_ctrl_set_params (struct dublk_ctrl *c, unsigned dev_id,
                       struct ublk_params *p)
{
  return buf_cmd (c, UBLK_CMD_SET_PARAMS, dev_id, p, sizeof *p, 0);
}

int
dublk_ctrl_get_params (struct dublk_ctrl *c, unsigned dev_id,
                       struct ublk_params *p)
{
  memset (p, 0, sizeof *p);
  p->len = sizeof *p;
  return buf_cmd (c, UBLK_CMD_GET_PARAMS, dev_id, p, sizeof *p, 0);
}

static int
pid_cmd (struct dublk_ctrl *c, unsigned op, unsigned dev_id, pid_t pid)
{
  struct ublksrv_ctrl_cmd cmd = make_cmd (dev_id, NULL, 0);

  cmd.data[0] = pid;
  return ctrl_cmd (c, op, &cmd, 0) < 0 ? -1 : 0;
}

int
dublk_ctrl_start (struct dublk_ctrl *c, unsigned dev_id, pid_t pid)
{
  return pid_cmd (c, UBLK_CMD_START_DEV, dev_id, pid);
}

int
dublk_ctrl_stop (struct dublk_ctrl *c, unsigned dev_id)
{
  return pid_cmd (c, UBLK_CMD_STOP_DEV, dev_id, 0);
}

int
dublk_ctrl_del (struct dublk_ctrl *c, unsigned dev_id)
{
  return pid_cmd (c, UBLK_CMD_DEL_DEV, dev_id, 0);
}

int
dublk_ctrl_end_recovery (struct dublk_ctrl *c, unsigned dev_id, pid_t pid)
{
  return pid_cmd (c, UBLK_CMD_END_USER_RECOVERY, dev_id, pid);
}

/* The kernel answers EBUSY until the old server's queues are quiesced
 * and its /dev/ublkcN released: right after a kill -9, that takes the
 * dead process's exit.
 */
int
dublk_ctrl_start_recovery (struct dublk_ctrl *c, unsigned dev_id,
                           unsigned timeout_ms)
{
  struct ublksrv_ctrl_cmd cmd = make_cmd (dev_id, NULL, 0);
  const struct timespec step = { 0, 50 * 1000 * 1000 };
  unsigned waited = 0;

  for (;;) {
    if (ctrl_cmd (c, UBLK_CMD_START_USER_RECOVERY, &cmd, EBUSY) >= 0)
      return 0;
    if (errno != EBUSY)
      return -1;
    if (waited >= timeout_ms) {
      dc_error ("ublk START_USER_RECOVERY on device %u: %m: still busy "
                "after %u ms (is its server still running?)", dev_id,
                timeout_ms);
      return -1;
    }
    nanosleep (&step, NULL);
    waited += 50;
  }
}
