/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the nbdkit plugin.  It hands the keys to the service,
 * follows nbdkit's lifecycle with it (open in get_ready, start in
 * after_fork, never before nbdkit daemonises; stop in cleanup), and maps
 * each NBD callback onto the volume.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "ctl-proto.h"
#include "keys.h"
#include "service.h"
#include "stop.h"
#include "stats.h"
#include "volume.h"

/* -D discardcache.stats=1 logs the statistics at unload. */
NBDKIT_DLL_PUBLIC int discardcache_debug_stats = 0;

static struct service_config cfg;
static struct service *service;
static struct volume *volume;           /* service's, while it is open */
static struct plugin_stop *stop;        /* the quit signals, once started */

/* --help's text, written from the table of keys at load.  nbdkit copies
 * the plugin struct (the pointer to this buffer) before it calls .load
 * and prints the help after it (nbdkit 1.32: server/plugins.c
 * plugin_register, server/main.c), so the text is there in time.
 * tests/lint/test-keys.sh checks that it is, and whole.
 */
static char config_help[8192];

static void
write_config_help (void)
{
  FILE *fp = fmemopen (config_help, sizeof config_help, "w");

  if (fp == NULL)
    return;
  service_keys_write_help (fp, SERVICE_FRONTEND_NBDKIT);
  fputs ("See nbdkit-discardcache-plugin(1).", fp);
  fclose (fp);
  config_help[sizeof config_help - 1] = '\0';
}

static void
discardcache_load (void)
{
  write_config_help ();
  service_config_init (&cfg);
}

static void
discardcache_unload (void)
{
  plugin_stop_free (stop);
  stop = NULL;
  service_close (service);
  service = NULL;
  volume = NULL;
  service_config_free (&cfg);
}

static int
discardcache_config (const char *key, const char *value)
{
  int r = service_config_set (&cfg, key, value);

  if (r == 1) {
    nbdkit_error ("unknown parameter '%s': see nbdkit discardcache --help "
                  "for the accepted keys", key);
    errno = EINVAL;
    return -1;
  }
  return r;
}

static int
discardcache_config_complete (void)
{
  return service_config_complete (&cfg);
}

/* Open everything before serving, so a bad backend is an error at
 * start.
 */
static int
discardcache_get_ready (void)
{
  service = service_open (&cfg);
  if (service == NULL)
    return -1;
  volume = service_volume (service);
  return 0;
}

/* The quit signals are taken from nbdkit here, after it installed its
 * own (nbdkit 1.32: set_up_signals before after_fork); without them
 * nbdkit's stop stays, which waits for the clients.
 */
static int
discardcache_after_fork (void)
{
  if (service_start (service) == -1)
    return -1;
  stop = plugin_stop_start (cfg.stop_timeout_ms, service_ctl_path (service));
  return 0;
}

/* A stop under way refuses connections: a keeper reconnecting would
 * otherwise find this server again instead of the next.
 */
static int
discardcache_preconnect (int readonly)
{
  if (plugin_stop_stopping (stop)) {
    nbdkit_error ("stopping: connection refused");
    errno = ESHUTDOWN;
    return -1;
  }
  return 0;
}

static void
log_stats_line (const char *line, void *opaque)
{
  nbdkit_debug ("stats: %s", line);
}

static void
discardcache_cleanup (void)
{
  struct volume_stats st;

  if (service == NULL)
    return;
  service_stop_within (service, plugin_stop_remaining_ms (stop));
  if (discardcache_debug_stats) {
    volume_get_stats (volume, &st);
    stats_write_lines (&st, log_stats_line, NULL);
  }
}

static void
discardcache_dump_plugin (void)
{
#ifdef HAVE_RBD
  printf ("discardcache_backends=file,blkdev,nbd,rbd\n");
#else
  printf ("discardcache_backends=file,blkdev,nbd\n");
#endif
  printf ("discardcache_statsfile=yes\n");
  printf ("discardcache_ctl=yes\n");
  printf ("discardcache_ctl_protocol=%d\n", CTL_PROTOCOL_VERSION);
  printf ("discardcache_state=zstd\n");
  printf ("discardcache_thin=yes\n");
  printf ("discardcache_locking=ofd\n");
}

static void *
discardcache_open (int readonly)
{
  /* The volume is shared by every connection; any non-NULL handle. */
  plugin_stop_opened (stop);
  return volume;
}

static void
discardcache_close (void *handle)
{
  plugin_stop_closed (stop);
}

static int64_t
discardcache_get_size (void *handle)
{
  return volume_size (volume);
}

static int
discardcache_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                         uint32_t *maximum)
{
  const struct backend_limits *lim = volume_limits (volume);

  *minimum = lim->min_block ? lim->min_block : 1;
  *preferred = lim->pref_block ? lim->pref_block : 4096;
  *maximum = lim->max_block ? lim->max_block : 0xffffffff;
  if (*preferred < *minimum)
    *preferred = *minimum;
  return 0;
}

static int
discardcache_can_write (void *handle)
{
  return !volume_limits (volume)->read_only;
}

static int
discardcache_can_flush (void *handle)
{
  return 1;
}

static int
discardcache_can_trim (void *handle)
{
  return !volume_limits (volume)->read_only;
}

static int
discardcache_can_zero (void *handle)
{
  return !volume_limits (volume)->read_only;
}

static int
discardcache_can_fast_zero (void *handle)
{
  return volume_limits (volume)->can_zero;
}

static int
discardcache_can_fua (void *handle)
{
  return volume_limits (volume)->can_fua ? NBDKIT_FUA_NATIVE
                                          : NBDKIT_FUA_EMULATE;
}

/* Every connection shares the one volume and backend, so a flush on any
 * connection covers writes made on all of them, when the backend's own
 * flush does.
 */
static int
discardcache_can_multi_conn (void *handle)
{
  return volume_limits (volume)->can_multi_conn;
}

static int
discardcache_can_extents (void *handle)
{
  return volume_limits (volume)->can_extents;
}

static int
discardcache_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                    uint32_t flags)
{
  plugin_stop_request (stop);
  return volume_pread (volume, buf, count, offset);
}

static int
discardcache_pwrite (void *handle, const void *buf, uint32_t count,
                     uint64_t offset, uint32_t flags)
{
  plugin_stop_request (stop);
  return volume_pwrite (volume, buf, count, offset, flags & NBDKIT_FLAG_FUA);
}

static int
discardcache_zero (void *handle, uint32_t count, uint64_t offset,
                   uint32_t flags)
{
  plugin_stop_request (stop);
  return volume_zero (volume, offset, count, flags & NBDKIT_FLAG_MAY_TRIM,
                      flags & NBDKIT_FLAG_FUA, flags & NBDKIT_FLAG_FAST_ZERO);
}

static int
discardcache_trim (void *handle, uint32_t count, uint64_t offset,
                   uint32_t flags)
{
  plugin_stop_request (stop);
  return volume_trim (volume, offset, count, flags & NBDKIT_FLAG_FUA);
}

static int
discardcache_flush (void *handle, uint32_t flags)
{
  plugin_stop_request (stop);
  return volume_flush (volume);
}

static int
add_extent (uint64_t offset, uint64_t length, uint32_t type, void *opaque)
{
  uint32_t nbd_type = 0;

  if (type & BACKEND_EXTENT_HOLE)
    nbd_type |= NBDKIT_EXTENT_HOLE;
  if (type & BACKEND_EXTENT_ZERO)
    nbd_type |= NBDKIT_EXTENT_ZERO;
  return nbdkit_add_extent (opaque, offset, length, nbd_type);
}

static int
discardcache_extents (void *handle, uint32_t count, uint64_t offset,
                      uint32_t flags, struct nbdkit_extents *extents)
{
  plugin_stop_request (stop);
  return volume_extents (volume, offset, count, add_extent, extents);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "discardcache",
  .version            = PACKAGE_VERSION,
  .longname           = "discardcache: a write-cancellable discard cache",
  .load               = discardcache_load,
  .unload             = discardcache_unload,
  .config             = discardcache_config,
  .config_complete    = discardcache_config_complete,
  .config_help        = config_help,
  .magic_config_key   = "backend",
  .get_ready          = discardcache_get_ready,
  .after_fork         = discardcache_after_fork,
  .cleanup            = discardcache_cleanup,
  .preconnect         = discardcache_preconnect,
  .dump_plugin        = discardcache_dump_plugin,
  .open               = discardcache_open,
  .close              = discardcache_close,
  .get_size           = discardcache_get_size,
  .block_size         = discardcache_block_size,
  .can_write          = discardcache_can_write,
  .can_flush          = discardcache_can_flush,
  .can_trim           = discardcache_can_trim,
  .can_zero           = discardcache_can_zero,
  .can_fast_zero      = discardcache_can_fast_zero,
  .can_fua            = discardcache_can_fua,
  .can_multi_conn     = discardcache_can_multi_conn,
  .can_extents        = discardcache_can_extents,
  .pread              = discardcache_pread,
  .pwrite             = discardcache_pwrite,
  .zero               = discardcache_zero,
  .trim               = discardcache_trim,
  .flush              = discardcache_flush,
  .extents            = discardcache_extents,
  .errno_is_preserved = 1,
};

/* NBDKIT_REGISTER_PLUGIN defines plugin_init without a prototype. */
struct nbdkit_plugin *plugin_init (void);
NBDKIT_REGISTER_PLUGIN (plugin)
