/* discardcache: engine settings (see config.h). */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "arith.h"
#include "cleanup.h"
#include "engine-config.h"
#include "log.h"
#include "parse.h"

const char engine_config_help[] =
  "backend=PATH|URI         (required) file, block device or NBD URI to serve.\n"
  "readonly=BOOL            Open the backend read-only and export read-only.\n"
  "delay=DURATION           Age before a pending discard is forwarded (30s).\n"
  "minlen=SIZE              Flusher skips shorter pending extents (0).\n"
  "granularity=auto|SIZE    Discard alignment, a power of two (auto).\n"
  "max-discard=auto|SIZE    Largest discard sent to the backend (auto).\n"
  "idle=DURATION            Client quiet time before forwarding (200ms).\n"
  "rate=N                   At most N discards per second, 0 = no limit (0).\n"
  "budget=DURATION          Pace forwarding by its measured cost: the extra\n"
  "                         client p99 latency it may cause, also under\n"
  "                         sustained load; replaces idle and rate (off).\n"
  "max-extents=N            Bound on pending extents (1M).\n"
  "on-full=forward|drop     What to do at max-extents (forward).\n"
  "flush-discards=BOOL      Client FLUSH forwards pending discards (false).\n"
  "passthrough=BOOL         Forward every trim at once, no caching (false).\n"
  "ctl=PATH|none            Control socket for discardctl (default:\n"
  "                         $XDG_RUNTIME_DIR/discardcache/PID.sock, else\n"
  "                         /run/discardcache/PID.sock).\n"
  "state=FILE               Save pending discards here at a clean stop and\n"
  "                         load them at the next start (none).\n"
  "thin=BOOL                Thin mode: map logical slots to physical ones,\n"
  "                         reusing freed slots (off).\n"
  "slot=SIZE                Thin slot size, a power of two (64k).\n"
  "size=SIZE                Thin exported size (the backend's).\n"
  "meta=FILE                Thin mode's map and journal (required).";

const char engine_config_runtime_keys[] = "delay, minlen, idle, rate and budget";

/* The largest rate= accepted, in discards per second. */
#define RATE_MAX 1000000
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_ (x)

void
engine_config_init (struct engine_config *cfg)
{
  *cfg = (struct engine_config) {
    .delay_ms = 30000,
    .idle_ms = 200,
    .max_extents = 1024 * 1024,
    .on_full = ON_FULL_FORWARD,
    .slot = 64 * 1024,
  };
}

void
engine_config_free (struct engine_config *cfg)
{
  free (cfg->backend);
  free (cfg->ctl);
  free (cfg->state);
  free (cfg->meta);
  cfg->backend = cfg->ctl = cfg->state = cfg->meta = NULL;
}

/* strdup that keeps NULL. */
static int
dup_string (const char *src, char **dst)
{
  *dst = NULL;
  if (src && (*dst = strdup (src)) == NULL)
    return -1;
  return 0;
}

int
engine_config_copy (struct engine_config *dst, const struct engine_config *src)
{
  *dst = *src;
  if (dup_string (src->backend, &dst->backend) == -1 ||
      dup_string (src->ctl, &dst->ctl) == -1 ||
      dup_string (src->state, &dst->state) == -1 ||
      dup_string (src->meta, &dst->meta) == -1) {
    dc_error ("engine: out of memory copying the settings");
    engine_config_free (dst);
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

static int
set_auto_or_power_of_2 (const char *key, const char *value, uint64_t *out)
{
  uint64_t n;

  if (strcmp (value, "auto") == 0) {
    *out = 0;
    return 0;
  }
  if (parse_size (key, value, &n) == -1)
    return -1;
  if (!is_power_of_2 (n)) {
    dc_error ("%s=%s: invalid value: expected auto or a power of two such as 4096 or 64k",
              key, value);
    errno = EINVAL;
    return -1;
  }
  *out = n;
  return 0;
}

static int
set_max_discard (const char *key, const char *value, uint64_t *out)
{
  uint64_t n;

  if (strcmp (value, "auto") == 0) {
    *out = 0;
    return 0;
  }
  if (parse_size (key, value, &n) == -1)
    return -1;
  if (n < 512) {
    dc_error ("%s=%s: invalid value: expected auto or a size of at least 512 bytes",
              key, value);
    errno = EINVAL;
    return -1;
  }
  *out = n;
  return 0;
}

static int
set_max_extents (const char *key, const char *value, uint64_t *out)
{
  uint64_t n;

  if (parse_scaled_count (key, value, &n) == -1)
    return -1;
  if (n == 0) {
    dc_error ("%s=%s: invalid value: expected a count of at least 1 (suffixes k, M: 1M = 1048576)",
              key, value);
    errno = EINVAL;
    return -1;
  }
  *out = n;
  return 0;
}

static int
set_on_full (const char *key, const char *value, enum on_full_policy *out)
{
  if (strcmp (value, "forward") == 0)
    *out = ON_FULL_FORWARD;
  else if (strcmp (value, "drop") == 0)
    *out = ON_FULL_DROP;
  else {
    dc_error ("%s=%s: invalid value: expected forward or drop", key, value);
    errno = EINVAL;
    return -1;
  }
  return 0;
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

/* An absolute path: nbdkit changes directory to / when it daemonises,
 * so a relative path is resolved against the directory it started in.
 */
static int
set_path (const char *key, const char *value, const char *forms, char **out)
{
  CLEANUP_FREE char *cwd = NULL;
  char *path;

  if (*value == '\0') {
    dc_error ("%s: empty value: expected %s", key, forms);
    errno = EINVAL;
    return -1;
  }
  if (value[0] == '/')
    path = strdup (value);
  else if ((cwd = getcwd (NULL, 0)) == NULL) {
    dc_error ("%s=%s: cannot resolve a relative path: getcwd: %m", key, value);
    return -1;
  }
  else if (asprintf (&path, "%s/%s", cwd, value) == -1)
    path = NULL;
  if (path == NULL) {
    dc_error ("%s: out of memory", key);
    errno = ENOMEM;
    return -1;
  }
  free (*out);
  *out = path;
  return 0;
}

/* Thin slots: at least a sector, at most 1 GiB (one slot is zero-filled
 * and discarded in one piece).
 */
static int
set_slot (const char *key, const char *value, uint64_t *out)
{
  uint64_t n;

  if (parse_size (key, value, &n) == -1)
    return -1;
  if (!is_power_of_2 (n) || n < 512 || n > (UINT64_C (1) << 30)) {
    dc_error ("%s=%s: invalid value: expected a power of two from 512 to 1G, "
              "such as 64k", key, value);
    errno = EINVAL;
    return -1;
  }
  *out = n;
  return 0;
}

static int
set_thin_size (const char *key, const char *value, uint64_t *out)
{
  uint64_t n;

  if (parse_size (key, value, &n) == -1)
    return -1;
  if (n == 0 || n > (UINT64_C (1) << 62)) {
    dc_error ("%s=%s: invalid value: expected %s, more than 0 and at most "
              "4E", key, value, PARSE_SIZE_FORMS);
    errno = EINVAL;
    return -1;
  }
  *out = n;
  return 0;
}

#define CTL_FORMS "none, or the path of a Unix socket to create, e.g. /run/dc.sock"

static int
set_ctl (const char *key, const char *value, struct engine_config *cfg)
{
  struct sockaddr_un sun;
  char *path = NULL;

  if (strcmp (value, "none") == 0) {
    free (cfg->ctl);
    cfg->ctl = NULL;
    cfg->ctl_disabled = true;
    return 0;
  }
  if (set_path (key, value, CTL_FORMS, &path) == -1)
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
engine_config_set (struct engine_config *cfg, const char *key,
                   const char *value)
{
  if (strcmp (key, "backend") == 0)
    return set_backend (key, value, &cfg->backend);
  if (strcmp (key, "readonly") == 0)
    return parse_bool (key, value, &cfg->read_only);
  if (strcmp (key, "delay") == 0)
    return parse_duration_ms (key, value, &cfg->delay_ms);
  if (strcmp (key, "minlen") == 0)
    return parse_size (key, value, &cfg->minlen);
  if (strcmp (key, "granularity") == 0)
    return set_auto_or_power_of_2 (key, value, &cfg->granularity);
  if (strcmp (key, "max-discard") == 0)
    return set_max_discard (key, value, &cfg->max_discard);
  if (strcmp (key, "idle") == 0)
    return parse_duration_ms (key, value, &cfg->idle_ms);
  if (strcmp (key, "rate") == 0)
    return parse_count (key, value, RATE_MAX, &cfg->rate);
  if (strcmp (key, "budget") == 0)
    return parse_duration_ms (key, value, &cfg->budget_ms);
  if (strcmp (key, "max-extents") == 0)
    return set_max_extents (key, value, &cfg->max_extents);
  if (strcmp (key, "on-full") == 0)
    return set_on_full (key, value, &cfg->on_full);
  if (strcmp (key, "flush-discards") == 0)
    return parse_bool (key, value, &cfg->flush_discards);
  if (strcmp (key, "passthrough") == 0)
    return parse_bool (key, value, &cfg->passthrough);
  if (strcmp (key, "ctl") == 0)
    return set_ctl (key, value, cfg);
  if (strcmp (key, "state") == 0)
    return set_path (key, value, "the path of a file, e.g. /var/lib/dc.state",
                     &cfg->state);
  if (strcmp (key, "thin") == 0)
    return parse_bool (key, value, &cfg->thin);
  if (strcmp (key, "slot") == 0)
    return set_slot (key, value, &cfg->slot);
  if (strcmp (key, "size") == 0)
    return set_thin_size (key, value, &cfg->size);
  if (strcmp (key, "meta") == 0)
    return set_path (key, value, "the path of a file, e.g. /var/lib/dc.meta",
                     &cfg->meta);
  return 1;
}

int
engine_config_complete (const struct engine_config *cfg)
{
  if (cfg->backend == NULL) {
    dc_error ("backend parameter is required: backend=PATH of a file or block "
              "device, or backend=URI such as nbd+unix:///?socket=/path");
    errno = EINVAL;
    return -1;
  }
  if (cfg->thin && cfg->meta == NULL) {
    dc_error ("thin=on needs meta=FILE: the file that keeps the slot map "
              "and its journal (created if missing)");
    errno = EINVAL;
    return -1;
  }
  if (!cfg->thin && (cfg->meta || cfg->size)) {
    dc_error ("%s is a thin-mode key: add thin=on, or remove it",
              cfg->meta ? "meta=" : "size=");
    errno = EINVAL;
    return -1;
  }
  return 0;
}

bool
engine_config_key_is_runtime (const char *key)
{
  static const char *const keys[] = { "delay", "minlen", "idle", "rate",
                                      "budget" };

  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp (key, keys[i]) == 0)
      return true;
  return false;
}

const char *
engine_config_forms (const char *key)
{
  if (strcmp (key, "delay") == 0 || strcmp (key, "idle") == 0 ||
      strcmp (key, "budget") == 0)
    return PARSE_DURATION_FORMS;
  if (strcmp (key, "minlen") == 0)
    return PARSE_SIZE_FORMS;
  if (strcmp (key, "rate") == 0)
    return "a whole number of discards per second from 0 (no limit) to " STRINGIFY (RATE_MAX);
  return NULL;
}
