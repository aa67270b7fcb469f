/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the keys of every layer (see service.h).  The service's
 * own keys are parsed here; the others go to the volume's and the
 * engine's parsers.
 */
#include <config.h>

#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "parse.h"
#include "service.h"
#include "strdup-null.h"

const char service_config_help[] = SERVICE_CONFIG_HELP;

void
service_config_init (struct service_config *cfg)
{
  memset (cfg, 0, sizeof *cfg);
  engine_config_init (&cfg->engine);
  volume_config_init (&cfg->volume);
}

void
service_config_free (struct service_config *cfg)
{
  free (cfg->backend);
  free (cfg->ctl);
  free (cfg->statsfile);
  cfg->backend = cfg->ctl = cfg->statsfile = NULL;
  engine_config_free (&cfg->engine);
  volume_config_free (&cfg->volume);
}

static int
set_backend (const char *key, const char *value, char **out)
{
  char *copy;

  if (*value == '\0') {
    dc_error ("%s: empty value: expected a path to a file or block device, "
              "or an NBD URI such as nbd+unix:///?socket=/path", key);
    errno = EINVAL;
    return -1;
  }
  copy = strdup (value);
  if (copy == NULL) {
    dc_error ("strdup: %m");
    return -1;
  }
  free (*out);
  *out = copy;
  return 0;
}

#define CTL_FORMS "none, or the path of a Unix socket to create, e.g. /run/dc.sock"

static int
set_ctl (const char *key, const char *value, struct service_config *cfg)
{
  struct sockaddr_un sun;
  char *path = NULL;

  if (strcmp (value, "none") == 0) {
    free (cfg->ctl);
    cfg->ctl = NULL;
    cfg->ctl_disabled = true;
    return 0;
  }
  if (parse_path (key, value, CTL_FORMS, &path) == -1)
    return -1;
  if (strlen (path) >= sizeof sun.sun_path) {
    dc_error ("%s=%s: the path is %zu bytes long, a Unix socket path may have "
              "at most %zu: expected %s", key, value, strlen (path),
              sizeof sun.sun_path - 1, CTL_FORMS);
    free (path);
    errno = EINVAL;
    return -1;
  }
  free (cfg->ctl);
  cfg->ctl = path;
  cfg->ctl_disabled = false;
  return 0;
}

int
service_config_set (struct service_config *cfg, const char *key,
                    const char *value)
{
  int r;

  if (strcmp (key, "backend") == 0)
    return set_backend (key, value, &cfg->backend);
  if (strcmp (key, "readonly") == 0)
    return parse_bool (key, value, &cfg->read_only);
  if (strcmp (key, "ctl") == 0)
    return set_ctl (key, value, cfg);
  if (strcmp (key, "statsfile") == 0)
    return parse_path (key, value, "a file name, e.g. /run/dc-stats.json",
                       &cfg->statsfile);
  r = volume_config_set (&cfg->volume, key, value);
  if (r != 1)
    return r;
  return engine_config_set (&cfg->engine, key, value);
}

/* The statistics are written only at exit: find out now, not then,
 * that they cannot be.
 */
static int
check_statsfile (const char *statsfile)
{
  CLEANUP_FREE char *dir = strdup (statsfile);
  const char *parent;
  struct stat st;

  if (dir == NULL) {
    dc_error ("strdup: %m");
    return -1;
  }
  if (stat (statsfile, &st) == 0 && S_ISDIR (st.st_mode)) {
    dc_error ("statsfile=%s: is a directory: expected a file name",
              statsfile);
    errno = EISDIR;
    return -1;
  }
  parent = dirname (dir);
  if (access (parent, W_OK | X_OK) == -1) {
    dc_error ("statsfile=%s: cannot write in %s: %m", statsfile, parent);
    return -1;
  }
  return 0;
}

int
service_config_complete (const struct service_config *cfg)
{
  if (cfg->backend == NULL) {
    dc_error ("backend parameter is required: backend=PATH of a file or block "
              "device, or backend=URI such as nbd+unix:///?socket=/path");
    errno = EINVAL;
    return -1;
  }
  if (volume_config_complete (&cfg->volume) == -1)
    return -1;
  if (cfg->statsfile && check_statsfile (cfg->statsfile) == -1)
    return -1;
  return 0;
}

int
service_config_copy (struct service_config *dst,
                     const struct service_config *src)
{
  *dst = *src;
  dst->backend = dst->ctl = dst->statsfile = dst->volume.meta = NULL;
  dst->engine.state = NULL;
  if (strdup_null (src->backend, &dst->backend) == -1 ||
      strdup_null (src->ctl, &dst->ctl) == -1 ||
      strdup_null (src->statsfile, &dst->statsfile) == -1 ||
      strdup_null (src->volume.meta, &dst->volume.meta) == -1 ||
      strdup_null (src->engine.state, &dst->engine.state) == -1) {
    dc_error ("service: out of memory copying the settings");
    service_config_free (dst);
    errno = ENOMEM;
    return -1;
  }
  return 0;
}
