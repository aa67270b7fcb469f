/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: the table of keys (service/keys.h), printed for
 * tests/lint/test-keys.sh, which compares it with --help, the man pages and
 * the README; and checked against the parsers.
 *
 *   keys-table          one key a line, tab-separated: name, forms,
 *                       default, runtime (yes|no), front-ends
 *                       (nbdkit,fuse,ublk), layer, help
 *   keys-table --help   the --help text for nbdkit|fuse|ublk (argument 2)
 *   keys-table --check  every key is parsed by its layer, every
 *                       default leaves a fresh config as it was, and the
 *                       runtime keys are the engine's; exit 1 naming
 *                       each key that fails
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-config.h"
#include "keys.h"
#include "service.h"

/* The front-ends' names, as test-keys.sh calls them. */
static const struct {
  const char *name;
  unsigned bit;
} frontends[] = {
  { "nbdkit", SERVICE_FRONTEND_NBDKIT },
  { "fuse", SERVICE_FRONTEND_FUSE },
  { "ublk", SERVICE_FRONTEND_UBLK },
};
#define NFRONTENDS (sizeof frontends / sizeof frontends[0])

static void
print_table (void)
{
  for (size_t i = 0; i < service_nkeys; i++) {
    const struct service_key *k = &service_keys[i];
    const char *sep = "";

    printf ("%s\t%s\t%s\t%s\t", k->name, k->forms,
            service_key_default (k), k->runtime ? "yes" : "no");
    for (size_t f = 0; f < NFRONTENDS; f++)
      if (k->frontends & frontends[f].bit) {
        printf ("%s%s", sep, frontends[f].name);
        sep = ",";
      }
    printf ("\t%s\t%s\n", service_layer_name (k->layer), k->help);
  }
}

/* The layer's parser must know the key: an empty value is a bad value
 * (EINVAL) for every key, never the dispatch's "not parsed" (ENOSYS).
 */
static int
check_parsed (const struct service_key *k)
{
  struct service_config cfg;
  int r;

  service_config_init (&cfg);
  errno = 0;
  r = service_config_set (&cfg, k->name, "");
  service_config_free (&cfg);
  if (r == -1 && errno != ENOSYS)
    return 0;
  fprintf (stderr, "keys-table: %s: its layer (%s) does not parse it "
           "(service_config_set returned %d, %s)\n", k->name,
           service_layer_name (k->layer), r, strerror (errno));
  return -1;
}

/* Setting the documented default changes nothing. */
static int
check_default (const struct service_key *k)
{
  struct service_config fresh, set;
  int r = 0;

  if (k->def == NULL)
    return 0;
  service_config_init (&fresh);
  service_config_init (&set);
  if (service_config_set (&set, k->name, k->def) != 0) {
    fprintf (stderr, "keys-table: %s: its default '%s' is refused\n",
             k->name, k->def);
    r = -1;
  }
  else if (memcmp (&fresh, &set, sizeof fresh) != 0) {
    fprintf (stderr, "keys-table: %s: the table says the default is '%s', "
             "but the config starts with another value\n", k->name, k->def);
    r = -1;
  }
  service_config_free (&fresh);
  service_config_free (&set);
  return r;
}

static int
check (void)
{
  int r = 0;

  for (size_t i = 0; i < service_nkeys; i++) {
    const struct service_key *k = &service_keys[i];

    if (check_parsed (k) == -1 || check_default (k) == -1)
      r = -1;
    /* The engine refuses, while running, what it does not call runtime:
     * the table must not offer more (or less).
     */
    if (k->layer == SERVICE_LAYER_ENGINE &&
        k->runtime != engine_config_key_is_runtime (k->name)) {
      fprintf (stderr, "keys-table: %s: the table says %s, the engine %s\n",
               k->name, k->runtime ? "runtime" : "not runtime",
               k->runtime ? "not" : "runtime");
      r = -1;
    }
    if (k->runtime && k->layer != SERVICE_LAYER_ENGINE) {
      fprintf (stderr, "keys-table: %s: only engine keys can be runtime "
               "(ctl-commands.c applies them with engine_set)\n", k->name);
      r = -1;
    }
    if (k->layer == SERVICE_LAYER_SERVICE && k->set == NULL) {
      fprintf (stderr, "keys-table: %s: a service key without a parser\n",
               k->name);
      r = -1;
    }
    if (service_key_find (k->name) != k) {
      fprintf (stderr, "keys-table: %s: in the table twice\n", k->name);
      r = -1;
    }
  }
  return r == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int
main (int argc, char *argv[])
{
  if (argc == 1) {
    print_table ();
    return EXIT_SUCCESS;
  }
  if (argc == 2 && strcmp (argv[1], "--check") == 0)
    return check ();
  if (argc == 3 && strcmp (argv[1], "--help") == 0)
    for (size_t f = 0; f < NFRONTENDS; f++)
      if (strcmp (argv[2], frontends[f].name) == 0)
        return service_keys_write_help (stdout, frontends[f].bit) == 0
               ? EXIT_SUCCESS : EXIT_FAILURE;
  fprintf (stderr, "usage: keys-table [--check | --help nbdkit|fuse|ublk]\n");
  return 2;
}
