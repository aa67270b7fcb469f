/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the one table of keys.  Every key of every layer is one
 * row: its name, the forms of its value, its default, a line of help,
 * the layer that parses it, whether `discardctl set` may change it while
 * the server runs, and which front-ends take it.  service_config_set
 * dispatches through it (a key not in the table is not a key); --help of
 * every front-end is written from it; tests/lint/test-keys.sh compares it
 * with the man pages and the README.  The parsing itself stays with each
 * layer (engine_config_set, volume_config_set, the service's own).
 */
#ifndef DISCARDCACHE_KEYS_H
#define DISCARDCACHE_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct service_config;

enum service_layer {
  SERVICE_LAYER_SERVICE,       /* service/config.c */
  SERVICE_LAYER_VOLUME,        /* volume_config_set */
  SERVICE_LAYER_ENGINE,        /* engine_config_set */
};

/* Front-ends, as a bit set: each --help lists the rows that carry its
 * bit.
 */
#define SERVICE_FRONTEND_NBDKIT 1u
#define SERVICE_FRONTEND_FUSE   2u
#define SERVICE_FRONTEND_UBLK   4u
#define SERVICE_FRONTEND_ALL \
  (SERVICE_FRONTEND_NBDKIT | SERVICE_FRONTEND_FUSE | SERVICE_FRONTEND_UBLK)

struct service_key {
  const char *name;
  const char *forms;           /* as --help shows them: "auto|SIZE" */
  /* The default: def is a value the key accepts and that leaves a fresh
   * config unchanged (tests/lint/keys-table checks it); when there is no such
   * value, def is NULL and def_text says it in words ("none"); both
   * NULL: the key is required.
   */
  const char *def;
  const char *def_text;
  const char *help;            /* one line, a sentence */
  enum service_layer layer;
  bool runtime;                /* discardctl set may change it */
  unsigned frontends;          /* SERVICE_FRONTEND_* */
  /* The parser of a service-layer key (NULL for the other layers). */
  int (*set) (struct service_config *cfg, const char *key, const char *value);
};

extern const struct service_key service_keys[];
extern const size_t service_nkeys;

/* The row of key, or NULL if it is not a key. */
extern const struct service_key *service_key_find (const char *name)
  __attribute__ ((nonnull (1)));

/* The default as the documents show it: def, def_text or "required". */
extern const char *service_key_default (const struct service_key *k)
  __attribute__ ((nonnull (1)));

/* "service", "volume" or "engine". */
extern const char *service_layer_name (enum service_layer layer);

/* Write --help's list of keys for one front-end (SERVICE_FRONTEND_*):
 * "key=FORMS  help (default)", wrapped to 79 columns.  0, or -1 if the
 * stream reports an error (a full buffer).
 */
extern int service_keys_write_help (FILE *fp, unsigned frontend)
  __attribute__ ((nonnull (1)));

/* The runtime keys as English, "delay, minlen, idle, rate and budget"
 * (conj "and" or "or"), into buf of n bytes (truncated to fit).
 */
extern void service_runtime_keys_text (char *buf, size_t n, const char *conj)
  __attribute__ ((nonnull (1, 3)));

/* Check KEY=VALUE pairs that `discardctl set` asks for, before any is
 * applied: each must be a key, changeable while running, with a valid
 * value.  0, or -1 with a message for the client in err
 * (naming the key and the accepted forms).
 */
extern int service_keys_check_runtime (const char *const *keys,
                                       const char *const *values, size_t n,
                                       char *err, size_t errlen)
  __attribute__ ((nonnull (4)));

#endif /* DISCARDCACHE_KEYS_H */
