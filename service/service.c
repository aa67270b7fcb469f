/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the service's lifecycle (see service.h), the one both
 * front-ends follow, so that the order of opening, starting, stopping
 * and closing lives in one place.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include "ctl.h"
#include "engine.h"
#include "log.h"
#include "service.h"
#include "stats.h"
#include "volume.h"

/* How long a stop may spend forwarding what is still pending. */
#define STOP_TIMEOUT_MS 30000

struct service {
  struct service_config cfg;
  struct engine *engine;
  struct volume *volume;
  struct ctl_server *ctl;           /* NULL: none, or not started */
  bool started;
  bool stopped;
};

struct service *
service_open_backend (const struct service_config *cfg, struct backend *b)
{
  struct service *s = calloc (1, sizeof *s);

  if (s == NULL) {
    dc_error ("service: out of memory");
    backend_close (b);
    return NULL;
  }
  if (service_config_copy (&s->cfg, cfg) == -1) {
    backend_close (b);
    free (s);
    return NULL;
  }
  s->engine = engine_open (&s->cfg.engine, b);
  if (s->engine == NULL)
    goto err;
  s->volume = volume_open (s->engine, &s->cfg.volume);
  if (s->volume == NULL)
    goto err;
  return s;

 err:
  {
    int saved_errno = errno;

    engine_close (s->engine);
    service_config_free (&s->cfg);
    free (s);
    errno = saved_errno;
    return NULL;
  }
}

struct service *
service_open (const struct service_config *cfg)
{
  struct backend *b = backend_open (cfg->backend, cfg->read_only);

  return b ? service_open_backend (cfg, b) : NULL;
}

/* The control socket first: at an explicit path, failing it fails the
 * start before any thread runs.
 */
int
service_start (struct service *s)
{
  if (!s->cfg.ctl_disabled) {
    s->ctl = ctl_start (s->engine, s->volume, s->cfg.ctl);
    if (s->ctl == NULL && s->cfg.ctl != NULL)
      return -1;
  }
  else
    dc_debug ("ctl=none: no control socket");
  if (engine_start (s->engine) == -1) {
    ctl_stop (s->ctl);
    s->ctl = NULL;
    return -1;
  }
  s->started = true;
  return 0;
}

int
service_stop (struct service *s)
{
  struct volume_stats st;

  if (s->stopped)
    return 0;
  s->stopped = true;
  ctl_stop (s->ctl);
  s->ctl = NULL;
  /* Never started (the front-end failed first): save to state= if set,
   * but spend no time forwarding.
   */
  engine_stop (s->engine, s->started ? STOP_TIMEOUT_MS : 0);
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
