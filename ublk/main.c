/* SPDX-License-Identifier: BSD-3-Clause */
/* discardublk: the lifecycle.
 *
 *   parse and check everything        (args.c; nothing opened yet)
 *   open /dev/ublk-control            (a kernel without ublk stops us here)
 *   service_open                      (a bad backend stops us here)
 *   daemonise: the parent waits for the child's word that the device
 *     is up, prints /dev/ublkbN and exits 0, or exits 1
 *   ADD_DEV + SET_PARAMS, or with --recover GET_DEV_INFO + GET_PARAMS
 *     (the device must be this volume's) + START_USER_RECOVERY
 *   service_start, the queues armed, START_DEV or END_USER_RECOVERY
 *   serve until SIGTERM/SIGINT/SIGHUP (or SIGUSR1: a restart)
 *   STOP_DEV (the queues serve until the kernel has let go), the
 *   queues joined, service_stop (state=, statsfile), DEL_DEV; with
 *   --keep, or at SIGUSR1, only the queues and the service are stopped:
 *   the kernel holds the device's I/O for a later --recover, and SIGUSR1
 *   exits DUBLK_EXIT_RESTART so that a service manager starts one.
 *
 * Everything in the child is done after the fork: the kernel binds the
 * device to the process that maps its queues and fetches its requests.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "discardublk.h"
#include "log.h"
#include "log-stderr.h"

/* How long --recover waits for the old server's exit to release the
 * device (START_USER_RECOVERY answers EBUSY until then).
 */
#define RECOVER_WAIT_MS 30000

/* The exit status after SIGUSR1: stopped, the device kept for a
 * --recover (EX_TEMPFAIL; discardublk@.service restarts on it).
 */
#define DUBLK_EXIT_RESTART 75

static int
open_service (struct dublk *d)
{
  d->service = service_open (&d->cfg);
  if (d->service == NULL)
    return -1;
  d->volume = service_volume (d->service);
  return 0;
}

/* The parent's side: wait for "N\n" from the child, print the device. */
static void __attribute__ ((noreturn))
parent_wait (int fd)
{
  char buf[32];
  ssize_t n, got = 0;

  while (got < (ssize_t) sizeof buf - 1 &&
         (n = read (fd, buf + got, sizeof buf - 1 - got)) > 0)
    got += n;
  buf[got] = '\0';
  if (got == 0 || buf[got - 1] != '\n')
    _exit (EXIT_FAILURE);          /* the child said why on stderr */
  printf ("/dev/ublkb%s", buf);
  fflush (stdout);
  _exit (EXIT_SUCCESS);
}

/* Returns in the child (or in the foreground process) with *ready_fd
 * the pipe to tell the parent on (-1 in the foreground).
 */
static int
daemonize (struct dublk *d, int *ready_fd)
{
  int p[2];
  pid_t pid;

  *ready_fd = -1;
  if (d->foreground)
    return 0;
  if (pipe2 (p, O_CLOEXEC) == -1) {
    dc_error ("pipe: %m");
    return -1;
  }
  fflush (NULL);
  pid = fork ();
  if (pid == -1) {
    dc_error ("fork: %m");
    return -1;
  }
  if (pid > 0) {
    close (p[1]);
    parent_wait (p[0]);
  }
  close (p[0]);
  setsid ();
  *ready_fd = p[1];
  return 0;
}

/* The device is up: say so, and in the daemon let go of the terminal. */
static void
report_ready (struct dublk *d, int ready_fd)
{
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%u\n", d->info.dev_id);
  int null;

  if (ready_fd == -1) {
    printf ("/dev/ublkb%s", buf);
    fflush (stdout);
    return;
  }
  if (write (ready_fd, buf, n) != n)
    dc_error ("telling the parent: %m");
  close (ready_fd);
  null = open ("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2 (null, 0), dup2 (null, 1), dup2 (null, 2);
    if (null > 2)
      close (null);
  }
  dc_log_to_syslog ();
  if (chdir ("/") == -1)
    dc_debug ("chdir /: %m");
}

static int
add_device (struct dublk *d)
{
  struct ublk_params p;

  d->info = (struct ublksrv_ctrl_dev_info) {
    .nr_hw_queues = d->nr_queues,
    .queue_depth = d->depth,
    .max_io_buf_bytes = DUBLK_MAX_IO,
    .dev_id = d->dev_id < 0 ? UINT32_MAX : (uint32_t) d->dev_id,
    /* REISSUE: a request the dead server had taken is sent again to the
     * next one rather than failed.  Every request here may run twice:
     * none was answered, so no later request depends on it.
     */
    .flags = UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE,
  };
  if (dublk_ctrl_add (&d->ctrl, &d->info) == -1)
    return -1;
  dublk_params_fill (d, &p);
  if (dublk_ctrl_set_params (&d->ctrl, d->info.dev_id, &p) == -1) {
    dublk_ctrl_del (&d->ctrl, d->info.dev_id);
    return -1;
  }
  return 0;
}

static int
recover_device (struct dublk *d)
{
  struct ublk_params p;

  if (dublk_ctrl_get_info (&d->ctrl, d->dev_id, &d->info) == -1)
    return -1;
  if (!(d->info.flags & UBLK_F_USER_RECOVERY)) {
    dc_error ("--recover: ublk device %d was made without user recovery",
              d->dev_id);
    errno = EINVAL;
    return -1;
  }
  if (d->info.max_io_buf_bytes > DUBLK_MAX_IO) {
    dc_error ("--recover: ublk device %d takes requests of %u bytes, more "
              "than discardublk's %d", d->dev_id, d->info.max_io_buf_bytes,
              DUBLK_MAX_IO);
    errno = EINVAL;
    return -1;
  }
  if (dublk_ctrl_get_params (&d->ctrl, d->dev_id, &p) == -1 ||
      dublk_params_check (d, &p) == -1)
    return -1;
  return dublk_ctrl_start_recovery (&d->ctrl, d->dev_id, RECOVER_WAIT_MS);
}

/* /dev/ublkcN appears with ADD_DEV; where udev makes the node, give it
 * a moment.
 */
static int
open_cdev (struct dublk *d)
{
  char path[64];
  const struct timespec step = { 0, 10 * 1000 * 1000 };
  int i;

  snprintf (path, sizeof path, "/dev/ublkc%u", d->info.dev_id);
  for (i = 0; i < 300; i++) {
    d->cdev_fd = open (path, O_RDWR | O_CLOEXEC);
    if (d->cdev_fd >= 0 || errno != ENOENT)
      break;
    nanosleep (&step, NULL);
  }
  if (d->cdev_fd == -1) {
    dc_error ("%s: %m", path);
    return -1;
  }
  return 0;
}

static int
block_signals (sigset_t *set)
{
  sigemptyset (set);
  sigaddset (set, SIGTERM);
  sigaddset (set, SIGINT);
  sigaddset (set, SIGHUP);
  sigaddset (set, SIGUSR1);
  signal (SIGPIPE, SIG_IGN);
  return pthread_sigmask (SIG_BLOCK, set, NULL) == 0 ? 0 : -1;
}

/* Everything up to serving.  On failure, what was set up is left for
 * shut_down.
 */
static int
bring_up (struct dublk *d, bool *added)
{
  d->stop_fd = eventfd (0, EFD_CLOEXEC);
  if (d->stop_fd == -1) {
    dc_error ("eventfd: %m");
    return -1;
  }
  if (dublk_ctrl_ring (&d->ctrl) == -1)
    return -1;
  if (d->recover ? recover_device (d) : add_device (d))
    return -1;
  *added = !d->recover;
  if (open_cdev (d) == -1 || service_start (d->service) == -1 ||
      dublk_queues_start (d) == -1)
    return -1;
  return d->recover
    ? dublk_ctrl_end_recovery (&d->ctrl, d->info.dev_id, getpid ())
    : dublk_ctrl_start (&d->ctrl, d->info.dev_id, getpid ());
}

/* delete: the device goes (STOP_DEV while the queues still serve the
 * kernel's last requests, DEL_DEV once /dev/ublkcN is closed); else it
 * stays, its I/O held for a --recover.
 */
static int
shut_down (struct dublk *d, bool delete)
{
  int r = 0;

  if (delete && d->queues && dublk_ctrl_stop (&d->ctrl, d->info.dev_id) == -1)
    r = -1;
  dublk_queues_stop (d);
  if (d->cdev_fd >= 0)
    close (d->cdev_fd);
  d->cdev_fd = -1;
  if (service_stop (d->service) == -1)
    r = -1;
  if (delete && dublk_ctrl_del (&d->ctrl, d->info.dev_id) == -1)
    r = -1;
  return r;
}

/* 0 or DUBLK_EXIT_RESTART after a clean stop, -1 on an error. */
static int
serve (struct dublk *d, int ready_fd)
{
  sigset_t set;
  bool added = false;
  int sig, r;

  if (block_signals (&set) == -1) {
    dc_error ("pthread_sigmask: %m");
    return -1;
  }
  if (bring_up (d, &added) == -1) {
    /* A device this run added goes again; a recovered one stays. */
    shut_down (d, added);
    return -1;
  }
  report_ready (d, ready_fd);
  while ((r = sigwait (&set, &sig)) == EINTR)
    ;
  dc_debug ("signal %d: stopping", sig);
  if (sig == SIGUSR1)
    return shut_down (d, false) == -1 ? -1 : DUBLK_EXIT_RESTART;
  return shut_down (d, !d->keep);
}

int
main (int argc, char *argv[])
{
  struct dublk d;
  int ready_fd = -1;
  int r;

  r = dublk_parse_args (&d, argc, argv);
  /* --help and --version: nothing more to do, and that is a success
   * (the positive statuses below are serve's, DUBLK_EXIT_RESTART).
   */
  if (r == 1) {
    dublk_free_args (&d);
    return EXIT_SUCCESS;
  }
  if (r == 0) {
    pthread_mutex_init (&d.lock, NULL);
    pthread_cond_init (&d.cond, NULL);
    r = dublk_ctrl_open (&d.ctrl);
  }
  if (r == 0)
    r = open_service (&d);
  if (r == 0)
    r = daemonize (&d, &ready_fd);
  if (r == 0)
    r = serve (&d, ready_fd);
  service_close (d.service);
  dublk_ctrl_close (&d.ctrl);
  if (d.stop_fd >= 0)
    close (d.stop_fd);
  dublk_free_args (&d);
  return r == -1 ? EXIT_FAILURE : r;
}
