/* SPDX-License-Identifier: BSD-3-Clause */
/* discardublk: the command line.
 *
 *   discardublk [--id=N] [--recover] [--keep] [--queues=N] [--depth=N]
 *               [--foreground] [backend=]PATH|URI [KEY=VALUE...]
 *
 * KEY=VALUE words are the service's keys, parsed through its table
 * (service_config_set), exactly as discardfuse takes them.  Everything
 * is checked here, before anything is opened.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discardublk.h"
#include "keys.h"
#include "log.h"
#include "parse.h"

#define USAGE \
  "usage: discardublk [--id=N] [--recover] [--keep] [--queues=N] " \
  "[--depth=N]\n" \
  "                   [--workers=N] [--foreground] [backend=]PATH|URI " \
  "[KEY=VALUE...]"

static int
set_key (struct dublk *d, const char *arg)
{
  int r = service_config_set_arg (&d->cfg, arg);

  if (r == 1) {
    dc_error ("unknown parameter '%.*s': see discardublk --help for the "
              "accepted keys", (int) strcspn (arg, "="), arg);
    errno = EINVAL;
    r = -1;
  }
  return r;
}

static int
set_word (struct dublk *d, const char *arg)
{
  if (service_arg_is_key_value (arg))
    return set_key (d, arg);
  if (d->cfg.backend) {
    dc_error ("unexpected argument '%s': the backend is %s already\n" USAGE,
              arg, d->cfg.backend);
    errno = EINVAL;
    return -1;
  }
  return service_config_set (&d->cfg, "backend", arg);
}

static void
print_help (void)
{
  printf (USAGE "\n\n"
          "Serve the backend behind a write-cancellable discard cache as a\n"
          "ublk block device, /dev/ublkbN (printed when ready).\n\n"
          "  --id=N        device number (default: the first free one)\n"
          "  --recover     take over device --id=N after its server died\n"
          "  --keep        leave the device at exit, for a later --recover\n"
          "  --queues=N    hardware queues, a thread each (default %d)\n"
          "  --depth=N     requests in flight per queue (default %d)\n"
          "  --workers=N   threads serving each queue's requests (default %d;\n"
          "                0: the queue's own thread, one request at a time)\n"
          "  --foreground  do not daemonise\n\n"
          "Keys:\n", DUBLK_DEFAULT_QUEUES, DUBLK_DEFAULT_DEPTH,
          DUBLK_DEFAULT_WORKERS);
  service_keys_write_help (stdout, SERVICE_FRONTEND_UBLK);
  printf ("\nNeeds Linux 6.0+ with ublk_drv (6.1+ for --recover).  "
          "See discardublk(1).\n");
}

static int
set_count (const char *name, const char *value, uint64_t min, uint64_t max,
           unsigned *out)
{
  uint64_t v;

  if (parse_count (name, value, max, &v) == -1)
    return -1;
  if (v < min) {
    dc_error ("--%s=%s: expected %llu to %llu", name, value,
              (unsigned long long) min, (unsigned long long) max);
    errno = EINVAL;
    return -1;
  }
  *out = v;
  return 0;
}

enum { OPT_ID = 256, OPT_QUEUES, OPT_DEPTH, OPT_WORKERS };

static int
parse_option (struct dublk *d, int c)
{
  unsigned id;

  switch (c) {
  case OPT_ID:
    if (set_count ("id", optarg, 0, INT32_MAX, &id) == -1)
      return -1;
    d->dev_id = id;
    return 0;
  case OPT_QUEUES:
    return set_count ("queues", optarg, 1, 64, &d->nr_queues);
  case OPT_DEPTH:
    return set_count ("depth", optarg, 1, 1024, &d->depth);
  case OPT_WORKERS:
    return set_count ("workers", optarg, 0, 256, &d->nr_workers);
  case 'r': d->recover = true; return 0;
  case 'k': d->keep = true; return 0;
  case 'f': d->foreground = true; return 0;
  case 'h': print_help (); return 1;
  case 'V': printf ("discardublk %s\n", PACKAGE_VERSION); return 1;
  default:
    dc_error ("see discardublk --help\n" USAGE);
    errno = EINVAL;
    return -1;
  }
}

static int
parse_options (struct dublk *d, int argc, char *argv[])
{
  static const struct option longopts[] = {
    { "id", required_argument, NULL, OPT_ID },
    { "queues", required_argument, NULL, OPT_QUEUES },
    { "depth", required_argument, NULL, OPT_DEPTH },
    { "workers", required_argument, NULL, OPT_WORKERS },
    { "recover", no_argument, NULL, 'r' },
    { "keep", no_argument, NULL, 'k' },
    { "foreground", no_argument, NULL, 'f' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
  };
  int c, r;

  while ((c = getopt_long (argc, argv, "fhV", longopts, NULL)) != -1)
    if ((r = parse_option (d, c)) != 0)
      return r;
  for (; optind < argc; optind++)
    if (set_word (d, argv[optind]) == -1)
      return -1;
  return 0;
}

int
dublk_parse_args (struct dublk *d, int argc, char *argv[])
{
  int r;

  memset (d, 0, sizeof *d);
  service_config_init (&d->cfg);
  d->dev_id = -1;
  d->nr_queues = DUBLK_DEFAULT_QUEUES;
  d->depth = DUBLK_DEFAULT_DEPTH;
  d->nr_workers = DUBLK_DEFAULT_WORKERS;
  d->cdev_fd = d->stop_fd = d->ctrl.fd = -1;
  r = parse_options (d, argc, argv);
  if (r != 0)
    return r;
  if (d->recover && d->dev_id < 0) {
    dc_error ("--recover needs --id=N: the device to take over");
    errno = EINVAL;
    return -1;
  }
  return service_config_complete (&d->cfg);
}

void
dublk_free_args (struct dublk *d)
{
  service_config_free (&d->cfg);
}
