/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the service, what both front-ends (the nbdkit plugin and
 * discardfuse) share: the keys, and the lifecycle of everything below
 * them.
 *
 *   open   everything that can fail, before any fork: the backend
 *          (locked), the control socket (bound), the engine (state=
 *          loaded), the volume (identity or thin, meta= locked)
 *   start  the threads, after any fork: the control socket's listener
 *          and the engine's flusher
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
/* stop-timeout='s default: a clean stop within a few seconds whatever
 * is pending (issue 23: 3 s on a device taking 5 ms a discard).
 */
#define SERVICE_DEFAULT_STOP_TIMEOUT_MS 2000

struct service_config {
  char *backend;               /* path or NBD URI (owned) */
  bool read_only;
  bool locking;                /* lock a regular-file backend (OFD lock) */
  char *ctl;                   /* control socket path (owned); NULL: default */
  bool ctl_disabled;           /* ctl=none */
  char *statsfile;             /* statistics as JSON at stop (owned) */
  uint64_t stop_timeout_ms;    /* stop-timeout=: a stop forwards this long at most */
  char *rbd_conf;              /* an rbd: backend's cluster (owned) ... */
  char *rbd_id;
  char *rbd_keyring;
  uint64_t rbd_timeout_ms;     /* ... and the bound on reaching it */
  bool low_water_given;        /* low-water= was set, even to off */
  struct engine_config engine;
  struct volume_config volume;
};

/* Fill in the defaults documented in the man pages. */
extern void service_config_init (struct service_config *cfg);
extern void service_config_free (struct service_config *cfg);

/* Copy src into dst, duplicating the strings.  0, or -1 (reported;
 * dst then owns nothing).
 */
extern int service_config_copy (struct service_config *dst,
                                const struct service_config *src);

/* Apply one key=value of any layer, through the table of keys.h.
 * Returns 0, -1 on a bad value (reported naming the key and the accepted
 * forms; cfg unchanged), or 1 if key is not a key at all.
 */
extern int service_config_set (struct service_config *cfg, const char *key,
                               const char *value);

/* A command-line word KEY=VALUE, as opposed to a path that happens to
 * contain '=': the key is a non-empty run of lower-case letters, digits,
 * '-' and '_' (the front-ends' rule for bare words).
 */
extern bool service_arg_is_key_value (const char *arg);

/* service_config_set on the word KEY=VALUE (same returns). */
extern int service_config_set_arg (struct service_config *cfg,
                                   const char *arg);

/* Check what single keys cannot: backend= present, the volume's keys
 * together, the directories of statsfile= and state= there and
 * writable.  0, or -1 (reported).
 */
extern int service_config_complete (const struct service_config *cfg);

struct service;

/* Open the backend the config names and lock it (locking=), create the
 * control socket, open the engine and the volume: everything that can
 * fail, so that a front-end calls this before it forks or daemonises.
 * The config (checked by service_config_complete) is copied.  NULL with
 * errno set on failure (reported, naming the key), and then nothing is
 * left: no socket, no lock, and what the engine took from state= is
 * saved there again.
 */
extern struct service *service_open (const struct service_config *cfg);

/* The same around a backend already open (tests: an in-memory one); the
 * service owns b from now on, even when this fails.
 */
extern struct service *service_open_backend (const struct service_config *cfg,
                                             struct backend *b);

/* Start the threads: the control socket's listener (renaming a default
 * PID.sock to this process's pid if it has forked since service_open)
 * and the flusher.  After the front-end has forked or daemonised, never
 * before.  0, or -1 (reported).
 */
extern int service_start (struct service *s);

/* Stop the control server, stop the engine (bounded), write the
 * statsfile.  Safe to call twice, and without a start.  Returns -1 when
 * the statsfile could not be written.
 */
extern int service_stop (struct service *s);

/* service_stop, forwarding for at most BUDGET_MS (capped by
 * stop-timeout=): what a front-end that already spent part of the
 * stop's bound (draining its clients) has left.
 */
extern int service_stop_within (struct service *s, uint64_t budget_ms);

/* Close the volume, then the engine and its backend (NULL allowed).
 * Stops first if service_stop has not run.
 */
extern void service_close (struct service *s);

/* The data path and the statistics. */
extern struct volume *service_volume (const struct service *s);

/* The control socket's path, NULL without one. */
extern const char *service_ctl_path (const struct service *s);

#endif /* DISCARDCACHE_SERVICE_H */
