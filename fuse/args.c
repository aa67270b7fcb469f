/* SPDX-License-Identifier: BSD-3-Clause */
/* discardfuse: the command line.
 *
 *   discardfuse [backend=]PATH|URI [KEY=VALUE...] [FUSE OPTIONS] MOUNTPOINT
 *
 * KEY=VALUE words are the service's keys (service_config_set: the same
 * parsing as the nbdkit plugin); they may
 * also come as -o KEY=VALUE, so that mount(8) and fstab can pass them
 * through mount.fuse3.  Every other option is libfuse's.  Everything is
 * checked here, before anything is opened or mounted.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "discardfuse.h"
#include "keys.h"
#include "log.h"

#define USAGE \
  "usage: discardfuse [backend=]PATH|URI [KEY=VALUE...] [FUSE OPTIONS] MOUNTPOINT"

static int
add_positional (struct dfuse *df, const char *arg)
{
  size_t n = df->positional[0] == NULL ? 0 : df->positional[1] == NULL ? 1 : 2;

  if (n == 2) {
    dc_error ("unexpected argument '%s': expected [backend=]PATH|URI, "
              "KEY=VALUE pairs and one MOUNTPOINT\n" USAGE, arg);
    return -1;
  }
  df->positional[n] = strdup (arg);
  if (df->positional[n] == NULL) {
    dc_error ("strdup: %m");
    return -1;
  }
  return 0;
}

/* fuse_opt_parse calls this for every word, and for every item of a -o
 * list.  Returning 0 consumes it, 1 leaves it for libfuse, -1 stops.
 */
static int
opt_proc (void *data, const char *arg, int key, struct fuse_args *outargs)
{
  struct dfuse *df = data;
  int r;

  if (key == FUSE_OPT_KEY_NONOPT) {
    if (!service_arg_is_key_value (arg))
      return add_positional (df, arg);
    r = service_config_set_arg (&df->cfg, arg);
    if (r == 1) {
      dc_error ("unknown parameter '%.*s': see discardfuse --help for the "
                "accepted keys", (int) strcspn (arg, "="), arg);
      return -1;
    }
    return r;
  }
  if (strcmp (arg, "writeback_cache") == 0) {
    dc_error ("-o writeback_cache: not supported: the page cache would hide "
              "writes from the engine, discards would fail with EIO and "
              "trims are about 3.5x slower");
    return -1;
  }
  if (!service_arg_is_key_value (arg))
    return 1;
  return service_config_set_arg (&df->cfg, arg);
}

static void
print_help (void)
{
  printf (USAGE "\n\n"
          "Mount MOUNTPOINT with two files: disk, the backend behind a\n"
          "write-cancellable discard cache, and stats (JSON).  Then:\n"
          "  losetup --direct-io=on -f --show MOUNTPOINT/disk\n\n"
          "Keys (also accepted as -o KEY=VALUE):\n");
  service_keys_write_help (stdout, SERVICE_FRONTEND_FUSE);
  printf ("\nSee discardfuse(1).\n\nFUSE options:\n");
  fuse_cmdline_help ();
  fuse_lowlevel_help ();
}

static void
print_version (void)
{
  printf ("discardfuse %s\nFUSE library version %s\n", PACKAGE_VERSION,
          fuse_pkgversion ());
  fuse_lowlevel_version ();
}

/* An empty directory: FUSE would mount over anything else and hide it. */
static int
check_mountpoint (const char *path)
{
  struct stat st;
  DIR *dir;
  struct dirent *d;
  int entries = 0;

  if (stat (path, &st) == -1) {
    dc_error ("mountpoint %s: %m: expected an empty directory", path);
    return -1;
  }
  if (!S_ISDIR (st.st_mode)) {
    dc_error ("mountpoint %s: not a directory: expected an empty directory",
              path);
    errno = ENOTDIR;
    return -1;
  }
  dir = opendir (path);
  if (dir == NULL) {
    dc_error ("mountpoint %s: %m", path);
    return -1;
  }
  while ((d = readdir (dir)) != NULL)
    if (strcmp (d->d_name, ".") != 0 && strcmp (d->d_name, "..") != 0)
      entries++;
  closedir (dir);
  if (entries) {
    dc_error ("mountpoint %s: not empty: expected an empty directory "
              "(the mount would hide what is there)", path);
    errno = ENOTEMPTY;
    return -1;
  }
  return 0;
}

/* [BACKEND] MOUNTPOINT: the backend may be given bare, as the plugin's
 * `nbdkit discardcache PATH` and mount.fuse3's `discardfuse SOURCE DIR`.
 */
static int
resolve_positional (struct dfuse *df)
{
  const char *mnt = df->positional[1] ? df->positional[1] : df->positional[0];

  if (mnt == NULL) {
    dc_error ("missing MOUNTPOINT: give an empty directory to mount on\n"
              USAGE);
    errno = EINVAL;
    return -1;
  }
  if (df->positional[1]) {
    if (df->cfg.backend) {
      dc_error ("backend given twice: backend=%s and '%s'", df->cfg.backend,
                df->positional[0]);
      errno = EINVAL;
      return -1;
    }
    if (service_config_set (&df->cfg, "backend", df->positional[0]) == -1)
      return -1;
  }
  if (check_mountpoint (mnt) == -1)
    return -1;
  df->mountpoint = realpath (mnt, NULL);
  if (df->mountpoint == NULL) {
    dc_error ("mountpoint %s: %m", mnt);
    return -1;
  }
  return 0;
}

int
dfuse_parse_args (struct dfuse *df, int argc, char *argv[])
{
  static const struct fuse_opt no_templates[] = { FUSE_OPT_END };

  memset (df, 0, sizeof *df);
  service_config_init (&df->cfg);
  df->fuse_args = (struct fuse_args) FUSE_ARGS_INIT (argc, argv);
  if (fuse_opt_parse (&df->fuse_args, df, no_templates, opt_proc) == -1 ||
      fuse_parse_cmdline (&df->fuse_args, &df->opts) == -1)
    return -1;
  if (df->opts.show_help) {
    print_help ();
    return 1;
  }
  if (df->opts.show_version) {
    print_version ();
    return 1;
  }
  if (resolve_positional (df) == -1 ||
      service_config_complete (&df->cfg) == -1)
    return -1;
  df->conn_opts = fuse_parse_conn_info_opts (&df->fuse_args);
  return df->conn_opts ? 0 : -1;
}

void
dfuse_free_args (struct dfuse *df)
{
  service_config_free (&df->cfg);
  free (df->mountpoint);
  free (df->positional[0]);
  free (df->positional[1]);
  free (df->opts.mountpoint);
  free (df->conn_opts);
  fuse_opt_free_args (&df->fuse_args);
}
