/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: engine settings (see config.h). */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arith.h"
#include "cleanup.h"
#include "engine-config.h"
#include "log.h"
#include "parse.h"
#include "strdup-null.h"

const char engine_config_runtime_keys[] = "delay, minlen, idle, rate and budget";

/* What budget= accepts. */
#define BUDGET_FORMS "off, or " PARSE_DURATION_FORMS

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
    .budget_ms = ENGINE_DEFAULT_BUDGET_MS,
    .max_extents = 1024 * 1024,
    .max_clean_extents = 1024 * 1024,
    .on_full = ON_FULL_FORWARD,
    .journal = true,
    .breaker = {
      .errors = 5, .latency_ms = 5000, .window_ms = 30000, .backoff_ms = 1000,
    },
    .proof_ppm = ENGINE_DEFAULT_PROOF_PPM,
    .proof_bytes = 1024 * 1024,
    .small_auto = true,
  };
}

void
engine_config_free (struct engine_config *cfg)
{
  free (cfg->state);
  cfg->state = NULL;
}

int
engine_config_copy (struct engine_config *dst, const struct engine_config *src)
{
  *dst = *src;
  if (strdup_null (src->state, &dst->state) == -1) {
    dc_error ("engine: out of memory copying the settings");
    engine_config_free (dst);
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

/* budget=: a duration, or off (0 too): idle-gated forwarding.  The
 * one place that knows what turns pacing off.
 */
static int
set_budget (const char *key, const char *value, uint64_t *out)
{
  if (strcmp (value, "off") == 0) {
    *out = 0;
    return 0;
  }
  if (value[0] < '0' || value[0] > '9')
    return parse_invalid (key, value, BUDGET_FORMS);
  return parse_duration_ms (key, value, out);
}

static int
set_max_extents (const char *key, const char *value, uint64_t *out)
{
  uint64_t n;

  if (parse_scaled_count (key, value, &n) == -1)
    return -1;
  if (n == 0)
    return parse_invalid (key, value, "a count of at least 1 (suffixes k, "
                          "M: 1M = 1048576)");
  *out = n;
  return 0;
}

/* 0 or off turns the known-clean map off. */
static int
set_max_clean_extents (const char *key, const char *value, uint64_t *out)
{
  if (strcmp (value, "off") == 0) {
    *out = 0;
    return 0;
  }
  if (!isdigit ((unsigned char) value[0]))
    return parse_invalid (key, value, "off, or a count with an optional "
                          "suffix k or M such as 1M (0 is off too)");
  return parse_scaled_count (key, value, out);
}

/* small=: auto (the cost model decides), off (0 too), or a size.  off
 * is read as 0, so that parse_auto_size's 0 means auto only for "auto".
 */
static int
set_small (const char *key, const char *value, struct engine_config *cfg)
{
  uint64_t n;

  if (parse_auto_size (key, strcmp (value, "off") == 0 ? "0" : value,
                       "auto, off, or " PARSE_SIZE_FORMS, 0, UINT64_MAX, false,
                       &n) == -1)
    return -1;
  cfg->small_auto = strcmp (value, "auto") == 0;
  cfg->small = n;
  return 0;
}

static int
set_on_full (const char *key, const char *value, enum on_full_policy *out)
{
  if (strcmp (value, "forward") == 0)
    *out = ON_FULL_FORWARD;
  else if (strcmp (value, "drop") == 0)
    *out = ON_FULL_DROP;
  else
    return parse_invalid (key, value, "forward or drop");
  return 0;
}

/* low-water=: off, a percentage (fractions allowed, under 100) of the
 * backend's store, or a size.
 */
#define LOW_WATER_FORMS "off, a percentage of the backend's store such " \
  "as 10% or 2.5% (under 100%), or " PARSE_SIZE_FORMS

static int
set_low_water (const char *key, const char *value, struct engine_config *cfg)
{
  size_t len = strlen (value);
  uint64_t bytes;

  if (strcmp (value, "off") == 0 || strcmp (value, "0") == 0) {
    cfg->low_water_ppm = cfg->low_water_bytes = 0;
    return 0;
  }
  if (len > 1 && value[len - 1] == '%') {
    char *end;
    double pct = strtod (value, &end);

    if (end != value + len - 1 || !(pct > 0 && pct < 100) ||
        !isdigit ((unsigned char) value[0]))
      return parse_invalid (key, value, LOW_WATER_FORMS);
    cfg->low_water_ppm = (uint64_t) (pct * 10000 + 0.5);
    cfg->low_water_bytes = 0;
    if (cfg->low_water_ppm == 0)
      cfg->low_water_ppm = 1;
    return 0;
  }
  if (parse_size (key, value, &bytes) == -1)
    return -1;
  cfg->low_water_bytes = bytes;
  cfg->low_water_ppm = 0;
  return 0;
}

/* off (0) or a count: breaker-errors=. */
static int
set_off_or_count (const char *key, const char *value, uint64_t *out)
{
  if (strcmp (value, "off") == 0) {
    *out = 0;
    return 0;
  }
  return parse_count (key, value, UINT32_MAX, out);
}

/* off (0) or a duration: breaker-latency=. */
static int
set_off_or_duration (const char *key, const char *value, uint64_t *out)
{
  if (strcmp (value, "off") == 0) {
    *out = 0;
    return 0;
  }
  if (!isdigit ((unsigned char) value[0]))
    return parse_invalid (key, value, "off, or " PARSE_DURATION_FORMS);
  return parse_duration_ms (key, value, out);
}

/* A duration of at least 1 ms: breaker-window=, breaker-backoff=. */
static int
set_positive_duration (const char *key, const char *value, uint64_t *out)
{
  uint64_t ms;

  if (parse_duration_ms (key, value, &ms) == -1)
    return -1;
  if (ms == 0)
    return parse_invalid (key, value,
                          "a duration above 0, " PARSE_DURATION_FORMS);
  *out = ms;
  return 0;
}

#define PROOF_FORMS "off, or a percentage from 0% to 100% with up to four " \
  "decimals, e.g. 1% or 0.5%"

/* proof=off|PERCENT, kept in parts per million. */
static int
set_proof (const char *key, const char *value, uint64_t *out)
{
  uint64_t whole = 0, frac = 0, scale = 10000;
  const char *p = value;

  if (strcmp (value, "off") == 0) {
    *out = 0;
    return 0;
  }
  if (!isdigit ((unsigned char) *p))
    goto bad;
  while (isdigit ((unsigned char) *p) && whole <= 100)
    whole = whole * 10 + (uint64_t) (*p++ - '0');
  if (*p == '.') {
    p++;
    if (!isdigit ((unsigned char) *p))
      goto bad;
    while (isdigit ((unsigned char) *p) && scale > 1) {
      scale /= 10;
      frac += (uint64_t) (*p++ - '0') * scale;
    }
  }
  if (strcmp (p, "%") != 0 || whole * 10000 + frac > 1000000)
    goto bad;
  *out = whole * 10000 + frac;
  return 0;

 bad:
  return parse_invalid (key, value, PROOF_FORMS);
}

int
engine_config_set (struct engine_config *cfg, const char *key,
                   const char *value)
{
  if (strcmp (key, "delay") == 0)
    return parse_duration_ms (key, value, &cfg->delay_ms);
  if (strcmp (key, "minlen") == 0)
    return parse_size (key, value, &cfg->minlen);
  if (strcmp (key, "small") == 0)
    return set_small (key, value, cfg);
  if (strcmp (key, "granularity") == 0)
    return parse_auto_size (key, value, "auto or a power of two such as "
                            "4096 or 64k", 1, UINT64_MAX, true,
                            &cfg->granularity);
  if (strcmp (key, "max-discard") == 0)
    return parse_auto_size (key, value, "auto or a size of at least 512 "
                            "bytes", 512, UINT64_MAX, false,
                            &cfg->max_discard);
  if (strcmp (key, "idle") == 0)
    return parse_duration_ms (key, value, &cfg->idle_ms);
  if (strcmp (key, "rate") == 0)
    return parse_count (key, value, RATE_MAX, &cfg->rate);
  if (strcmp (key, "budget") == 0)
    return set_budget (key, value, &cfg->budget_ms);
  if (strcmp (key, "max-extents") == 0)
    return set_max_extents (key, value, &cfg->max_extents);
  if (strcmp (key, "max-clean-extents") == 0)
    return set_max_clean_extents (key, value, &cfg->max_clean_extents);
  if (strcmp (key, "on-full") == 0)
    return set_on_full (key, value, &cfg->on_full);
  if (strcmp (key, "flush-discards") == 0)
    return parse_bool (key, value, &cfg->flush_discards);
  if (strcmp (key, "passthrough") == 0)
    return parse_bool (key, value, &cfg->passthrough);
  if (strcmp (key, "low-water") == 0)
    return set_low_water (key, value, cfg);
  if (strcmp (key, "journal") == 0)
    return parse_bool (key, value, &cfg->journal);
  if (strcmp (key, "breaker-errors") == 0)
    return set_off_or_count (key, value, &cfg->breaker.errors);
  if (strcmp (key, "breaker-latency") == 0)
    return set_off_or_duration (key, value, &cfg->breaker.latency_ms);
  if (strcmp (key, "breaker-window") == 0)
    return set_positive_duration (key, value, &cfg->breaker.window_ms);
  if (strcmp (key, "breaker-backoff") == 0)
    return set_positive_duration (key, value, &cfg->breaker.backoff_ms);
  if (strcmp (key, "window") == 0)
    return window_parse (key, value, &cfg->windows);
  if (strcmp (key, "proof") == 0)
    return set_proof (key, value, &cfg->proof_ppm);
  if (strcmp (key, "proof-bytes") == 0)
    return parse_size (key, value, &cfg->proof_bytes);
  if (strcmp (key, "proof-adapt") == 0)
    return parse_bool (key, value, &cfg->proof_adapt);
  if (strcmp (key, "state") == 0)
    return parse_path (key, value, "the path of a file, e.g. /var/lib/dc.state",
                       &cfg->state);
  return 1;
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
  if (strcmp (key, "delay") == 0 || strcmp (key, "idle") == 0)
    return PARSE_DURATION_FORMS;
  if (strcmp (key, "budget") == 0)
    return BUDGET_FORMS;
  if (strcmp (key, "minlen") == 0)
    return PARSE_SIZE_FORMS;
  if (strcmp (key, "rate") == 0)
    return "a whole number of discards per second from 0 (no limit) to " STRINGIFY (RATE_MAX);
  return NULL;
}
