/* SPDX-License-Identifier: BSD-3-Clause */
/* discardfuse: the lifecycle, in the order nbdkit gives the plugin:
 *
 *   parse and check everything      (args.c; nothing opened yet)
 *   service_open                    (a bad backend stops us unmounted)
 *   mount, then daemonise           (the parent exits once mounted)
 *   service_start                   (after the fork, like after_fork)
 *   serve until unmounted or SIGTERM/SIGINT/SIGHUP
 *   unmount, service_stop (bounded, statsfile), service_close
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "discardfuse.h"
#include "log.h"
#include "log-stderr.h"

/* Fail early and clearly: libfuse's own message for a missing device
 * comes only after it has tried fusermount3 too.
 */
static int
check_dev_fuse (void)
{
  int fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);

  if (fd == -1) {
    dc_error ("/dev/fuse: %m: FUSE is not available here (load the module "
              "with 'modprobe fuse'; in a container, pass the device "
              "/dev/fuse)");
    return -1;
  }
  close (fd);
  return 0;
}

static int
open_service (struct dfuse *df)
{
  df->service = service_open (&df->cfg);
  if (df->service == NULL)
    return -1;
  df->volume = service_volume (df->service);
  df->size = volume_size (df->volume);
  df->granularity = volume_granularity (df->volume);
  df->read_only = volume_limits (df->volume)->read_only;
  df->uid = getuid ();
  df->gid = getgid ();
  clock_gettime (CLOCK_REALTIME, &df->start);
  return 0;
}

/* libfuse's messages follow ours to syslog once stderr is gone; its
 * levels are syslog's.
 */
static void fuse_log_to_syslog (enum fuse_log_level level, const char *fmt,
                                va_list ap)
  __attribute__ ((format (printf, 2, 0)));

static void
fuse_log_to_syslog (enum fuse_log_level level, const char *fmt, va_list ap)
{
  vsyslog (level, fmt, ap);
}

static int
daemonize (struct dfuse *df)
{
  if (df->opts.foreground)
    return fuse_daemonize (1);
  if (fuse_daemonize (0) == -1)
    return -1;
  dc_log_to_syslog ();
  fuse_set_log_func (fuse_log_to_syslog);
  return 0;
}

/* The signals are for libfuse's handler in the main thread, which then
 * ends the loop; the flusher must not take them, as libfuse's own
 * workers do not.
 */
static int
start_service (struct dfuse *df)
{
  sigset_t block, saved;
  int r;

  sigemptyset (&block);
  sigaddset (&block, SIGTERM);
  sigaddset (&block, SIGINT);
  sigaddset (&block, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &block, &saved);
  r = service_start (df->service);
  pthread_sigmask (SIG_SETMASK, &saved, NULL);
  return r;
}

/* Returns 0 once unmounted or stopped by a signal, -1 on an error. */
static int
run_loop (struct dfuse *df, struct fuse_session *se)
{
  struct fuse_loop_config *config;
  int r;

  if (df->opts.singlethread)
    r = fuse_session_loop (se);
  else {
    config = fuse_loop_cfg_create ();
    if (config == NULL) {
      dc_error ("fuse_loop_cfg_create: out of memory");
      return -1;
    }
    /* UINT_MAX: not given, keep libfuse's default. */
    fuse_loop_cfg_set_clone_fd (config, df->opts.clone_fd);
    if (df->opts.max_idle_threads != UINT_MAX)
      fuse_loop_cfg_set_idle_threads (config, df->opts.max_idle_threads);
    if (df->opts.max_threads != UINT_MAX)
      fuse_loop_cfg_set_max_threads (config, df->opts.max_threads);
    r = fuse_session_loop_mt (se, config);
    fuse_loop_cfg_destroy (config);
  }
  if (r < 0) {
    dc_error ("fuse session on %s: %s", df->mountpoint, strerror (-r));
    return -1;
  }
  return 0;
}

/* Mount, serve, unmount; se is destroyed on return.  The loop returns
 * only after its workers have finished their requests.  The service is
 * stopped here (pending discards forwarded, statistics written) only if
 * it was started: a mount that failed leaves no statistics file behind.
 */
static int
serve (struct dfuse *df, struct fuse_session *se)
{
  bool started = false;
  int r = -1;

  if (fuse_set_signal_handlers (se) == 0) {
    if (fuse_session_mount (se, df->mountpoint) == 0) {
      if (daemonize (df) == 0 && start_service (df) == 0) {
        started = true;
        r = run_loop (df, se);
      }
      fuse_session_unmount (se);
    }
    fuse_remove_signal_handlers (se);
  }
  /* Before the stop, which may take a while: closing the device fails
   * loop's further I/O at once instead of leaving it waiting.
   */
  fuse_session_destroy (se);
  if (started && service_stop (df->service) == -1)
    r = -1;
  return r;
}

int
main (int argc, char *argv[])
{
  struct dfuse df;
  struct fuse_session *se = NULL;
  int r;

  r = dfuse_parse_args (&df, argc, argv);
  if (r == 0)
    r = check_dev_fuse ();
  /* The session before the engine: it checks libfuse's options without
   * opening the backend.
   */
  if (r == 0) {
    se = fuse_session_new (&df.fuse_args, &dfuse_ops, sizeof dfuse_ops, &df);
    r = se ? open_service (&df) : -1;
  }
  if (r == 0)
    r = serve (&df, se);
  else if (se)
    fuse_session_destroy (se);
  service_close (df.service);
  dfuse_free_args (&df);
  return r == -1 ? EXIT_FAILURE : EXIT_SUCCESS;
}
