/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the keys of every layer (see keys.h and service.h): the
 * one table, the service's own parsers, and the dispatch through the
 * table to the volume's and the engine's parsers.
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
#include "engine-config.h"
#include "keys.h"
#include "log.h"
#include "parse.h"
#include "service.h"
#include "strdup-null.h"

void
service_config_init (struct service_config *cfg)
{
  memset (cfg, 0, sizeof *cfg);
  cfg->locking = true;
  cfg->stop_timeout_ms = SERVICE_DEFAULT_STOP_TIMEOUT_MS;
  cfg->rbd_timeout_ms = 30000;
  engine_config_init (&cfg->engine);
  volume_config_init (&cfg->volume);
}

void
service_config_free (struct service_config *cfg)
{
  free (cfg->backend);
  free (cfg->ctl);
  free (cfg->statsfile);
  free (cfg->rbd_conf);
  free (cfg->rbd_id);
  free (cfg->rbd_keyring);
  cfg->backend = cfg->ctl = cfg->statsfile = NULL;
  cfg->rbd_conf = cfg->rbd_id = cfg->rbd_keyring = NULL;
  engine_config_free (&cfg->engine);
  volume_config_free (&cfg->volume);
}

/* Replace *out with a copy of value. */
static int
replace_string (char **out, const char *value)
{
  char *copy = strdup (value);

  if (copy == NULL) {
    dc_error ("strdup: %m");
    return -1;
  }
  free (*out);
  *out = copy;
  return 0;
}

static int
set_backend (struct service_config *cfg, const char *key, const char *value)
{
  if (*value == '\0') {
    dc_error ("%s: empty value: expected a path to a file or block device, "
              "an NBD URI such as nbd+unix:///?socket=/path, or "
              "rbd:POOL/IMAGE", key);
    errno = EINVAL;
    return -1;
  }
  return replace_string (&cfg->backend, value);
}

#define CTL_FORMS "none, or the path of a Unix socket to create, e.g. /run/dc.sock"

static int
set_ctl (struct service_config *cfg, const char *key, const char *value)
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

static int
set_readonly (struct service_config *cfg, const char *key, const char *value)
{
  return parse_bool (key, value, &cfg->read_only);
}

static int
set_locking (struct service_config *cfg, const char *key, const char *value)
{
  return parse_bool (key, value, &cfg->locking);
}

static int
set_statsfile (struct service_config *cfg, const char *key, const char *value)
{
  return parse_path (key, value, "a file name, e.g. /run/dc-stats.json",
                     &cfg->statsfile);
}

static int
set_stop_timeout (struct service_config *cfg, const char *key,
                  const char *value)
{
  return parse_duration_ms (key, value, &cfg->stop_timeout_ms);
}

static int
set_rbd_conf (struct service_config *cfg, const char *key, const char *value)
{
  return parse_path (key, value, "the Ceph configuration file, e.g. "
                     "/etc/ceph/ceph.conf", &cfg->rbd_conf);
}

static int
set_rbd_keyring (struct service_config *cfg, const char *key,
                 const char *value)
{
  return parse_path (key, value, "a Ceph keyring file, e.g. "
                     "/etc/ceph/ceph.client.admin.keyring", &cfg->rbd_keyring);
}

/* A Ceph client id: what follows "client.", as rbd --id takes it. */
static int
set_rbd_id (struct service_config *cfg, const char *key, const char *value)
{
  if (*value == '\0' || strpbrk (value, " \t\n/")) {
    dc_error ("%s=%s: expected a Ceph client id such as admin (the NAME "
              "of client.NAME), without spaces or '/'", key, value);
    errno = EINVAL;
    return -1;
  }
  return replace_string (&cfg->rbd_id, value);
}

/* librados counts whole seconds: at least one. */
static int
set_rbd_timeout (struct service_config *cfg, const char *key,
                 const char *value)
{
  uint64_t ms;

  if (parse_duration_ms (key, value, &ms) == -1)
    return -1;
  if (ms < 1000 || ms > UINT64_C (86400000)) {
    dc_error ("%s=%s: expected a duration from 1s to 24h", key, value);
    errno = EINVAL;
    return -1;
  }
  cfg->rbd_timeout_ms = ms;
  return 0;
}

#define ALL SERVICE_FRONTEND_ALL
#define SERVICE SERVICE_LAYER_SERVICE
#define VOLUME SERVICE_LAYER_VOLUME
#define ENGINE SERVICE_LAYER_ENGINE

/* In the order --help, the man pages and the README list them. */
const struct service_key service_keys[] = {
  { "backend", "PATH|URI|rbd:POOL/IMAGE", NULL, NULL,
    "The file, block device, NBD URI or Ceph RBD image to serve.",
    SERVICE, false, ALL, set_backend },
  { "delay", "DURATION", "30s", NULL,
    "Age before a pending discard may be forwarded.",
    ENGINE, true, ALL, NULL },
  { "minlen", "SIZE", "0", NULL,
    "The flusher leaves shorter pending extents.",
    ENGINE, true, ALL, NULL },
  { "small", "auto|off|SIZE", "auto", NULL,
    "Hold shorter pending extents until they merge or an explicit flush "
    "(a stop saves them to state= or leaves them, counted); auto: where "
    "the measured per-command cost dominates, up to 64k.",
    ENGINE, false, ALL, NULL },
  { "granularity", "auto|SIZE", "auto", NULL,
    "Alignment of forwarded discards, a power of two.",
    ENGINE, false, ALL, NULL },
  { "max-discard", "auto|SIZE", "auto", NULL,
    "Largest discard sent to the backend.",
    ENGINE, false, ALL, NULL },
  { "idle", "DURATION", "200ms", NULL,
    "Client quiet time before the flusher forwards.",
    ENGINE, true, ALL, NULL },
  { "rate", "N", "0", NULL,
    "At most N discards per second, 0 for no limit.",
    ENGINE, true, ALL, NULL },
  { "budget", "off|DURATION", "2ms", NULL,
    "Pace forwarding by its measured cost, the extra client p99 latency "
    "it may cause, also under sustained load (replaces idle and rate); "
    "off: forward only while clients are idle.",
    ENGINE, true, ALL, NULL },
  { "max-extents", "N", "1M", NULL,
    "Bound on pending extents (memory).",
    ENGINE, false, ALL, NULL },
  { "on-full", "forward|drop", "forward", NULL,
    "What to do with the oldest extent at max-extents.",
    ENGINE, false, ALL, NULL },
  { "max-clean-extents", "N|off", "1M", NULL,
    "Bound on the known-clean map (ranges discarded and not written since, "
    "whose TRIMs are not sent again); off sends every TRIM.",
    ENGINE, false, ALL, NULL },
  { "low-water", "off|PERCENT%|SIZE", NULL,
    "off (RBD: while the pool is flagged full)",
    "Backend free space below which every pending discard is forwarded "
    "at once, ignoring delay, idle and budget (a file's file system, an "
    "RBD image's pool; refused where free space is unknown: block "
    "devices, NBD).",
    ENGINE, false, ALL, NULL },
  { "flush-discards", "BOOL", "false", NULL,
    "A client FLUSH forwards pending discards first.",
    ENGINE, false, ALL, NULL },
  { "passthrough", "BOOL", "false", NULL,
    "Forward every trim at once, no caching (a baseline).",
    ENGINE, false, ALL, NULL },
  { "breaker-errors", "N|off", "5", NULL,
    "Open the circuit breaker after N consecutive discard errors: "
    "forwarding is held, retried by one probe discard with exponential "
    "backoff; off: errors never open it.",
    ENGINE, false, ALL, NULL },
  { "breaker-latency", "DURATION|off", "5s", NULL,
    "A discard slower than this is slow; slow ones for breaker-window "
    "open the breaker (a slow probe keeps it open); off: no bound.",
    ENGINE, false, ALL, NULL },
  { "breaker-window", "DURATION", "30s", NULL,
    "How long discards must stay slow to open the breaker.",
    ENGINE, false, ALL, NULL },
  { "breaker-backoff", "DURATION", "1s", NULL,
    "Wait before the first probe of an open breaker, doubling after each "
    "failed probe up to 5 minutes.",
    ENGINE, false, ALL, NULL },
  { "window", "HH:MM-HH:MM[,...]", NULL, "none (forward at any time)",
    "Forward only inside these local-time windows (repeatable), except "
    "under space pressure, at max-extents and on discardctl flush.",
    ENGINE, false, ALL, NULL },
  { "proof", "PERCENT|off", "1%", NULL,
    "Share of forwarded discards checked afterwards for freed space "
    "(file, NBD with block status; not block devices).",
    ENGINE, false, ALL, NULL },
  { "proof-bytes", "SIZE", "1M", NULL,
    "At most this much of one sampled discard is checked.",
    ENGINE, false, ALL, NULL },
  { "proof-adapt", "BOOL", "false", NULL,
    "When a check finds a discard ineffective, double the forwarding "
    "granularity (up to 4M) and say so; off: only report.",
    ENGINE, false, ALL, NULL },
  { "readonly", "BOOL", "false", NULL,
    "Open the backend read-only and export read-only.",
    SERVICE, false, ALL, set_readonly },
  { "locking", "BOOL", "on", NULL,
    "Lock a regular-file backend against a second server (shared when "
    "read-only); off shares it, at your own risk.",
    SERVICE, false, ALL, set_locking },
  { "rbd-conf", "FILE", NULL, "$CEPH_CONF, else /etc/ceph/ceph.conf",
    "The Ceph configuration of an rbd: backend's cluster.",
    SERVICE, false, ALL, set_rbd_conf },
  { "rbd-id", "NAME", NULL, "admin",
    "The Ceph client (client.NAME) an rbd: backend connects as.",
    SERVICE, false, ALL, set_rbd_id },
  { "rbd-keyring", "FILE", NULL, "the one rbd-conf names",
    "The keyring of that client.",
    SERVICE, false, ALL, set_rbd_keyring },
  { "rbd-timeout", "DURATION", "30s", NULL,
    "Bound on reaching the cluster and on each of its operations; a start "
    "that cannot reach it fails after this.",
    SERVICE, false, ALL, set_rbd_timeout },
  { "statsfile", "FILE", NULL, "none",
    "Write the statistics as JSON to FILE at exit.",
    SERVICE, false, ALL, set_statsfile },
  { "ctl", "SOCKET|none", NULL,
    "PID.sock in $XDG_RUNTIME_DIR/discardcache, else in /run/discardcache",
    "Control socket for discardctl; none for no socket.",
    SERVICE, false, ALL, set_ctl },
  { "state", "FILE", NULL, "none",
    "Save pending discards to FILE at a clean stop, load them at the "
    "next start.",
    ENGINE, false, ALL, NULL },
  { "journal", "BOOL", "on", NULL,
    "With state=: record changes to the pending set in FILE.journal, "
    "durable at each FLUSH, so that a crash keeps them; off: only a "
    "clean stop saves them.",
    ENGINE, false, ALL, NULL },
  { "stop-timeout", "DURATION", "2s", NULL,
    "Without state=, a stop forwards pending discards, largest first, "
    "this long at most; what is left is counted as dropped.",
    SERVICE, false, ALL, set_stop_timeout },
  { "thin", "BOOL", "off", NULL,
    "Thin mode: map logical slots to physical ones, reusing freed slots.",
    VOLUME, false, ALL, NULL },
  { "slot", "auto|SIZE", "auto", NULL,
    "Thin mode's slot size, a power of two; auto: meta='s if it exists, "
    "else the discard granularity, at least 4k.",
    VOLUME, false, ALL, NULL },
  { "size", "SIZE", NULL, "the backend's",
    "Thin mode's exported size.",
    VOLUME, false, ALL, NULL },
  { "reserve", "SIZE|PERCENT%", NULL,
    "the larger of 64M and 1% of the exported size",
    "Thin mode's reuse reserve: freed slots kept undiscarded for reuse "
    "(0: discard every freed run, as before reserve= existed).",
    VOLUME, false, ALL, NULL },
  { "meta", "FILE", NULL, "none, required with thin=on",
    "Thin mode's slot map and journal (created if missing).",
    VOLUME, false, ALL, NULL },
};
const size_t service_nkeys = sizeof service_keys / sizeof service_keys[0];

#undef ALL
#undef SERVICE
#undef VOLUME
#undef ENGINE

const char *
service_layer_name (enum service_layer layer)
{
  switch (layer) {
  case SERVICE_LAYER_SERVICE: return "service";
  case SERVICE_LAYER_VOLUME: return "volume";
  case SERVICE_LAYER_ENGINE: return "engine";
  }
  return "?";
}

void
service_runtime_keys_text (char *buf, size_t n, const char *conj)
{
  size_t total = 0, seen = 0, len = 0;

  for (size_t i = 0; i < service_nkeys; i++)
    total += service_keys[i].runtime;
  buf[0] = '\0';
  for (size_t i = 0; i < service_nkeys && len < n; i++) {
    const char *sep = seen == 0 ? "" : seen + 1 < total ? ", " : " ";

    if (!service_keys[i].runtime)
      continue;
    seen++;
    len += snprintf (buf + len, n - len, "%s%s%s%s", sep,
                     seen > 1 && seen == total ? conj : "",
                     seen > 1 && seen == total ? " " : "",
                     service_keys[i].name);
  }
}

const struct service_key *
service_key_find (const char *name)
{
  for (size_t i = 0; i < service_nkeys; i++)
    if (strcmp (service_keys[i].name, name) == 0)
      return &service_keys[i];
  return NULL;
}

int
service_config_set (struct service_config *cfg, const char *key,
                    const char *value)
{
  const struct service_key *k = service_key_find (key);
  int r;

  if (k == NULL)
    return 1;
  switch (k->layer) {
  case SERVICE_LAYER_SERVICE:
    return k->set (cfg, key, value);
  case SERVICE_LAYER_VOLUME:
    r = volume_config_set (&cfg->volume, key, value);
    break;
  case SERVICE_LAYER_ENGINE:
    r = engine_config_set (&cfg->engine, key, value);
    if (r == 0 && strcmp (key, "low-water") == 0)
      cfg->low_water_given = true;
    break;
  default:
    r = 1;
  }
  if (r == 1) {
    /* The table and the layer's parser disagree: a bug, caught by
     * tests/lint/keys-table before it ships.
     */
    dc_error ("%s: internal error: the key is in the table but the %s "
              "layer does not parse it", key, service_layer_name (k->layer));
    errno = ENOSYS;
    return -1;
  }
  return r;
}

bool
service_arg_is_key_value (const char *arg)
{
  size_t n = strspn (arg, "abcdefghijklmnopqrstuvwxyz0123456789-_");

  return n > 0 && arg[n] == '=';
}

int
service_config_set_arg (struct service_config *cfg, const char *arg)
{
  const char *eq = strchr (arg, '=');
  CLEANUP_FREE char *key = NULL;

  if (eq == NULL) {
    dc_error ("'%s': expected KEY=VALUE", arg);
    errno = EINVAL;
    return -1;
  }
  key = strndup (arg, eq - arg);
  if (key == NULL) {
    dc_error ("strndup: %m");
    return -1;
  }
  return service_config_set (cfg, key, eq + 1);
}

/* The forms a client is told for a bad value: the layer's own words
 * where it has them.
 */
static const char *
value_forms (const struct service_key *k)
{
  const char *forms = NULL;

  if (k->layer == SERVICE_LAYER_ENGINE)
    forms = engine_config_forms (k->name);
  return forms ? forms : k->forms;
}

int
service_keys_check_runtime (const char *const *keys,
                            const char *const *values, size_t n,
                            char *err, size_t errlen)
{
  struct service_config scratch;
  char can[256];
  int r = 0;

  service_runtime_keys_text (can, sizeof can, "and");
  service_config_init (&scratch);
  for (size_t i = 0; i < n && r == 0; i++) {
    const struct service_key *k = service_key_find (keys[i]);

    r = -1;
    if (k == NULL)
      snprintf (err, errlen, "set %s: unknown key: the keys that can be "
                "changed while running are %s", keys[i], can);
    else if (!k->runtime)
      snprintf (err, errlen, "set %s: cannot be changed while running (only "
                "at start): the keys that can are %s", keys[i], can);
    else if (service_config_set (&scratch, keys[i], values[i]) != 0)
      snprintf (err, errlen, "set " PARSE_INVALID_FMT, keys[i], values[i],
                value_forms (k));
    else
      r = 0;
  }
  service_config_free (&scratch);
  return r;
}

/* The statistics and the state file are written only at the stop:
 * find out now, before serving, that they cannot be.  Both are written
 * as FILE.tmp, then renamed, so the directory must take new files.
 */
static int
check_output_file (const char *key, const char *path)
{
  CLEANUP_FREE char *dir = strdup (path);
  const char *parent;
  struct stat st;

  if (dir == NULL) {
    dc_error ("strdup: %m");
    return -1;
  }
  if (stat (path, &st) == 0 && S_ISDIR (st.st_mode)) {
    dc_error ("%s=%s: is a directory: expected a file name", key, path);
    errno = EISDIR;
    return -1;
  }
  parent = dirname (dir);
  if (access (parent, W_OK | X_OK) == -1) {
    dc_error ("%s=%s: cannot write in %s: %m", key, path, parent);
    return -1;
  }
  return 0;
}

int
service_config_complete (const struct service_config *cfg)
{
  if (cfg->backend == NULL) {
    dc_error ("backend parameter is required: backend=PATH of a file or block "
              "device, backend=URI such as nbd+unix:///?socket=/path, or "
              "backend=rbd:POOL/IMAGE");
    errno = EINVAL;
    return -1;
  }
  if (volume_config_complete (&cfg->volume) == -1)
    return -1;
  if (cfg->statsfile && check_output_file ("statsfile", cfg->statsfile) == -1)
    return -1;
  /* Read-only, the engine leaves the state file alone. */
  if (cfg->engine.state && !cfg->read_only &&
      check_output_file ("state", cfg->engine.state) == -1)
    return -1;
  return 0;
}

int
service_config_copy (struct service_config *dst,
                     const struct service_config *src)
{
  *dst = *src;
  dst->backend = dst->ctl = dst->statsfile = dst->volume.meta = NULL;
  dst->rbd_conf = dst->rbd_id = dst->rbd_keyring = NULL;
  dst->engine.state = NULL;
  if (strdup_null (src->backend, &dst->backend) == -1 ||
      strdup_null (src->ctl, &dst->ctl) == -1 ||
      strdup_null (src->statsfile, &dst->statsfile) == -1 ||
      strdup_null (src->rbd_conf, &dst->rbd_conf) == -1 ||
      strdup_null (src->rbd_id, &dst->rbd_id) == -1 ||
      strdup_null (src->rbd_keyring, &dst->rbd_keyring) == -1 ||
      strdup_null (src->volume.meta, &dst->volume.meta) == -1 ||
      strdup_null (src->engine.state, &dst->engine.state) == -1) {
    dc_error ("service: out of memory copying the settings");
    service_config_free (dst);
    errno = ENOMEM;
    return -1;
  }
  return 0;
}
