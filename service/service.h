/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the service, what both front-ends (the nbdkit plugin and
 * discardfuse) share: the keys, and the lifecycle of everything below
 * them.
 *
 *   open   the backend, then the engine, the volume (identity or thin)
 *   start  the control server and the engine's flusher (after any fork)
 *   stop   the control server down, the engine stopped (pending discards
 *          saved to state= or forwarded, bounded), the statsfile written
 *   close  the volume's metadata made durable, then the engine and the
 *          backend closed
 *
 * The front-ends then drive the data path through service_volume's
 * volume.h.  Functions returning int return 0 or -1 with errno set, the
 * error reported once with dc_error.
 */
#ifndef DISCARDCACHE_SERVICE_H
#define DISCARDCACHE_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "engine-config.h"
#include "volume.h"

/* Every key a front-end accepts, by layer. */
struct service_config {
  char *backend;               /* path or NBD URI (owned) */
  bool read_only;
  char *ctl;                   /* control socket path (owned); NULL: default */
  bool ctl_disabled;           /* ctl=none */
  char *statsfile;             /* statistics as JSON at stop (owned) */
  struct engine_config engine;
  struct volume_config volume;
};

/* The keys of every layer, one per line, "key=VALUE  explanation", for
 * --help (the macro is a string literal, for nbdkit's config_help).
 */
#define SERVICE_CONFIG_HELP \
  "backend=PATH|URI         (required) file, block device or NBD URI to serve.\n" \
  "readonly=BOOL            Open the backend read-only and export read-only.\n" \
  ENGINE_CONFIG_HELP "\n" \
  "ctl=PATH|none            Control socket for discardctl (default:\n" \
  "                         $XDG_RUNTIME_DIR/discardcache/PID.sock, else\n" \
  "                         /run/discardcache/PID.sock).\n" \
  "statsfile=FILE           Write the statistics as JSON here at exit.\n" \
  VOLUME_CONFIG_HELP
extern const char service_config_help[];

/* Fill in the defaults documented in the man pages. */
extern void service_config_init (struct service_config *cfg);
extern void service_config_free (struct service_config *cfg);

/* Copy src into dst, duplicating the strings.  0, or -1 (reported;
 * dst then owns nothing).
 */
extern int service_config_copy (struct service_config *dst,
                                const struct service_config *src);

/* Apply one key=value of any layer.  Returns 0, -1 on a bad value
 * (reported naming the key and the accepted forms; cfg unchanged), or 1
 * if key is not a key at all.
 */
extern int service_config_set (struct service_config *cfg, const char *key,
                               const char *value);

/* Check what single keys cannot: backend= present, the volume's keys
 * together, statsfile= writable.  0, or -1 (reported).
 */
extern int service_config_complete (const struct service_config *cfg);

struct service;

/* Open the backend the config names, then the engine and the volume.
 * The config is copied.  NULL with errno set on failure (reported).
 */
extern struct service *service_open (const struct service_config *cfg);

/* The same around a backend already open (tests: an in-memory one); the
 * service owns b from now on, even when this fails.
 */
extern struct service *service_open_backend (const struct service_config *cfg,
                                             struct backend *b);

/* Start the control server (unless ctl=none) and the flusher: after the
 * front-end has forked or daemonised, never before.  A control socket at
 * an explicit ctl=PATH that cannot be created fails the start; at the
 * default path the failure is only reported.
 */
extern int service_start (struct service *s);

/* Stop the control server, stop the engine (bounded), write the
 * statsfile.  Safe to call twice, and without a start.  Returns -1 when
 * the statsfile could not be written.
 */
extern int service_stop (struct service *s);

/* Close the volume, then the engine and its backend (NULL allowed).
 * Stops first if service_stop has not run.
 */
extern void service_close (struct service *s);

/* The data path and the statistics. */
extern struct volume *service_volume (const struct service *s);

/* The control socket's path while it is served, else NULL. */
extern const char *service_ctl_path (const struct service *s);

#endif /* DISCARDCACHE_SERVICE_H */
