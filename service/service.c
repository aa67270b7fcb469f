/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the service's lifecycle (see service.h), the one both
 * front-ends follow, so that the order of opening, starting, stopping
 * and closing lives in one place.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cleanup.h"
#include "ctl.h"
#include "engine.h"
#include "log.h"
#include "service.h"
#include "stats.h"
#include "tick.h"
#include "volume.h"

struct service {
  struct service_config cfg;
  struct engine *engine;
  struct volume *volume;
  struct ctl_server *ctl;           /* NULL: none */
  struct service_tick *tick;        /* NULL: not started */
  struct backend *backend;          /* the engine's, for the fork hooks */
  bool started;
  bool stopped;
};

/* The control socket is created here, before the front-end forks or
 * daemonises, so that a ctl=PATH where it cannot be made fails the start
 * while the command that started the server can still tell; it is
 * served from service_start.  At the default path a failure is only
 * reported: the server serves without a socket.
 */
static int
open_ctl (struct service *s)
{
  if (s->cfg.ctl_disabled) {
    dc_debug ("ctl=none: no control socket");
    return 0;
  }
  s->ctl = ctl_open (s->cfg.ctl);
  return s->ctl == NULL && s->cfg.ctl != NULL ? -1 : 0;
}

/* Without low-water=, a store that says when it is full (an RBD pool
 * flagged nearfull, full or over its quota) still frees itself: a mark
 * of one byte forwards every pending discard while it says so, and
 * only then (invariant 11: pressure only forwards sooner).  Discards
 * are what give a full pool its space back, and librados runs them at
 * a full pool, where writes that need space fail with ENOSPC.
 */
static void
default_low_water (struct service_config *cfg, const struct backend *b)
{
  if (cfg->low_water_given || cfg->read_only ||
      !backend_limits (b)->free_says_full || !backend_has_free_space (b))
    return;
  cfg->engine.low_water_bytes = 1;
  cfg->engine.low_water_ppm = 0;
  dc_debug ("low-water: unset: pending discards are forwarded at once "
            "while backend %s says it is full", backend_identity (b)->name);
}

struct service *
service_open_backend (const struct service_config *cfg, struct backend *b)
{
  struct service *s = calloc (1, sizeof *s);

  if (s == NULL) {
    dc_error ("service: out of memory");
    backend_close (b);
    return NULL;
  }
  /* The backend locked and the control socket bound before the engine
   * loads state=: a state file must not be consumed by a server that
   * will not start.
   */
  if (service_config_copy (&s->cfg, cfg) == -1 ||
      (cfg->locking && backend_lock (b) == -1) || open_ctl (s) == -1) {
    backend_close (b);
    service_config_free (&s->cfg);
    free (s);
    return NULL;
  }
  default_low_water (&s->cfg, b);
  s->engine = engine_open (&s->cfg.engine, b);
  if (s->engine == NULL)
    goto err;
  s->volume = volume_open (s->engine, &s->cfg.volume);
  if (s->volume == NULL)
    goto err;
  /* Last: everything is checked; service_start takes it up again. */
  s->backend = b;
  if (backend_before_fork (b) == -1) {
    service_close (s);
    return NULL;
  }
  return s;

 err:
  {
    int saved_errno = errno;

    /* What the engine took from state= goes back there. */
    if (s->engine)
      engine_stop (s->engine, 0);
    engine_close (s->engine);
    ctl_stop (s->ctl);
    service_config_free (&s->cfg);
    free (s);
    errno = saved_errno;
    return NULL;
  }
}

struct service *
service_open (const struct service_config *cfg)
{
  struct backend_rbd_options rbd = {
    .conf = cfg->rbd_conf, .id = cfg->rbd_id, .keyring = cfg->rbd_keyring,
    .timeout_ms = cfg->rbd_timeout_ms,
  };
  struct backend_options o = {
    .read_only = cfg->read_only,
    .need_free_space = cfg->engine.low_water_ppm != 0 ||
                       cfg->engine.low_water_bytes != 0,
    .rbd = &rbd,
  };
  CLEANUP_FREE char *holder = NULL;
  struct backend *b;

  /* Beside state=: the instance of this server that held the backend
   * last (docs/design-notes.md, "Taking over a crashed holder's lock").
   */
  if (cfg->engine.state && asprintf (&holder, "%s.holder",
                                     cfg->engine.state) == -1) {
    dc_error ("service: out of memory");
    return NULL;
  }
  rbd.holder_file = holder;
  b = backend_open_with (cfg->backend, &o);
  return b ? service_open_backend (cfg, b) : NULL;
}

/* The threads, after any fork: the control socket's listener, the
 * flusher, then the volume's timer.
 */
int
service_start (struct service *s)
{
  if (backend_after_fork (s->backend) == -1)
    return -1;
  if (s->ctl && ctl_start (s->ctl, s->engine, s->volume) == -1)
    return -1;
  if (engine_start (s->engine) == -1)
    return -1;
  if ((s->tick = tick_start (s->volume)) == NULL)
    return -1;
  s->started = true;
  return 0;
}

int
service_stop (struct service *s)
{
  return service_stop_within (s, s->cfg.stop_timeout_ms);
}

int
service_stop_within (struct service *s, uint64_t budget_ms)
{
  struct volume_stats st;

  if (s->stopped)
    return 0;
  s->stopped = true;
  tick_stop (s->tick);
  s->tick = NULL;
  ctl_stop (s->ctl);
  s->ctl = NULL;
  /* Never started (the front-end failed first): save to state= if set,
   * but spend no time forwarding.
   */
  if (budget_ms > s->cfg.stop_timeout_ms)
    budget_ms = s->cfg.stop_timeout_ms;
  engine_stop (s->engine, s->started ? budget_ms : 0);
  if (s->cfg.statsfile == NULL || !s->started)
    return 0;
  volume_get_stats (s->volume, &st);
  return stats_write_file (&st, s->cfg.statsfile);
}

void
service_close (struct service *s)
{
  if (s == NULL)
    return;
  /* Not stopped (a front-end failed between open and start, say): stop
   * now, so that a state file is still written.
   */
  service_stop (s);
  volume_close (s->volume);
  engine_close (s->engine);
  service_config_free (&s->cfg);
  free (s);
}

struct volume *
service_volume (const struct service *s)
{
  return s->volume;
}

const char *
service_ctl_path (const struct service *s)
{
  return s->ctl ? ctl_path (s->ctl) : NULL;
}
