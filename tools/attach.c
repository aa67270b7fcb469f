/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: discardctl attach SOCKET /dev/nbdN [--connections=N]
 * [--dead-timeout=DURATION] [--foreground] [--log=FILE] [--adopt], and
 * discardctl detach /dev/nbdN: the command lines; the keeper does the
 * work.
 */
#include <config.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attach.h"
#include "ctl-client.h"
#include "log.h"
#include "parse.h"

#ifdef HAVE_NETLINK
#include "keeper.h"

/* The kernel holds I/O this long for a server to come back. */
#define DEFAULT_DEAD_TIMEOUT_MS 60000

static int
usage (const char *msg)
{
  fprintf (stderr, "discardctl: %s\n"
           "Usage: discardctl attach SOCKET /dev/nbdN [--connections=N] "
           "[--dead-timeout=DURATION] [--foreground] [--log=FILE] "
           "[--adopt]\n"
           "       discardctl detach /dev/nbdN\n", msg);
  return EXIT_USAGE;
}

static int
parse_attach (int argc, char **argv, struct keeper_options *o)
{
  static const struct option opts[] = {
    { "connections", required_argument, NULL, 'C' },
    { "dead-timeout", required_argument, NULL, 't' },
    { "foreground", no_argument, NULL, 'f' },
    { "log", required_argument, NULL, 'l' },
    { "adopt", no_argument, NULL, 'a' },
    { NULL, 0, NULL, 0 },
  };
  uint64_t n;
  int c;

  optind = 0;                  /* GNU getopt: start again, permuting */
  opterr = 0;
  while ((c = getopt_long (argc, argv, ":C:t:fl:a", opts, NULL)) != -1) {
    switch (c) {
    case 'C':
      if (parse_count ("--connections", optarg, 16, &n) == -1 || n == 0)
        return usage ("--connections: from 1 to 16");
      o->connections = n;
      break;
    case 't':
      if (parse_duration_ms ("--dead-timeout", optarg,
                             &o->dead_timeout_ms) == -1)
        return EXIT_USAGE;
      break;
    case 'f': o->foreground = true; break;
    case 'l': o->log = optarg; break;
    case 'a': o->adopt = true; break;
    default: return usage ("attach: unknown option or missing value");
    }
  }
  if (argc - optind != 2)
    return usage ("attach: SOCKET and /dev/nbdN are required");
  o->socket = argv[optind];
  o->device = argv[optind + 1];
  return EXIT_OK;
}

int
attach_main (int argc, char **argv)
{
  struct keeper_options o = {
    .connections = 1, .dead_timeout_ms = DEFAULT_DEAD_TIMEOUT_MS,
  };
  int r;

  if (strcmp (argv[0], "detach") == 0) {
    if (argc != 2)
      return usage ("detach: /dev/nbdN is required");
    return keeper_detach (argv[1]) == 0 ? EXIT_OK : EXIT_CONNECT;
  }
  if ((r = parse_attach (argc, argv, &o)) != EXIT_OK)
    return r;
  return keeper_attach (&o) == 0 ? EXIT_OK : EXIT_CONNECT;
}

#else /* !HAVE_NETLINK */

int
attach_main (int argc, char **argv)
{
  dc_error ("%s: discardctl was built without netlink (libnl-genl-3): "
            "rebuild with libnl-genl-3-dev installed", argv[0]);
  return EXIT_USAGE;
}

#endif /* !HAVE_NETLINK */
