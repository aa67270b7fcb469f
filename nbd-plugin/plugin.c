/* discardcache: the nbdkit plugin.  It parses the keys, owns the one
 * engine, and maps each NBD callback onto it.  The flusher thread starts
 * in after_fork (never before nbdkit daemonises) and stops in cleanup.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "cleanup.h"
#include "ctl-proto.h"
#include "engine-config.h"
#include "engine.h"
#include "stats.h"

/* -D discardcache.stats=1 logs the statistics at unload. */
NBDKIT_DLL_PUBLIC int discardcache_debug_stats = 0;

/* How long cleanup may spend forwarding what is still pending. */
#define STOP_TIMEOUT_MS 30000

static struct engine_config cfg;
static char *statsfile;
static struct engine *engine;

static void
discardcache_load (void)
{
  engine_config_init (&cfg);
}

static void
discardcache_unload (void)
{
  engine_close (engine);
  engine = NULL;
  engine_config_free (&cfg);
  free (statsfile);
}

static int
discardcache_config (const char *key, const char *value)
{
  int r;

  if (strcmp (key, "statsfile") == 0) {
    if (*value == '\0') {
      nbdkit_error ("statsfile: empty value: expected a file name");
      errno = EINVAL;
      return -1;
    }
    free (statsfile);
    statsfile = nbdkit_absolute_path (value);
    return statsfile ? 0 : -1;
  }
  r = engine_config_set (&cfg, key, value);
  if (r == 1) {
    nbdkit_error ("unknown parameter '%s': see nbdkit discardcache --help "
                  "for the accepted keys", key);
    errno = EINVAL;
    return -1;
  }
  return r;
}

/* The statistics are written only at exit: find out now, not then,
 * that they cannot be.
 */
static int
check_statsfile (void)
{
  CLEANUP_FREE char *dir = strdup (statsfile);
  const char *parent;
  struct stat st;

  if (dir == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  if (stat (statsfile, &st) == 0 && S_ISDIR (st.st_mode)) {
    nbdkit_error ("statsfile=%s: is a directory: expected a file name",
                  statsfile);
    errno = EISDIR;
    return -1;
  }
  parent = dirname (dir);
  if (access (parent, W_OK | X_OK) == -1) {
    nbdkit_error ("statsfile=%s: cannot write in %s: %m", statsfile, parent);
    return -1;
  }
  return 0;
}

static int
discardcache_config_complete (void)
{
  if (statsfile && check_statsfile () == -1)
    return -1;
  return engine_config_complete (&cfg);
}

#define discardcache_config_help \
  "backend=PATH|URI (required) and the engine keys:\n" \
  "readonly=BOOL delay=DURATION minlen=SIZE granularity=auto|SIZE\n" \
  "max-discard=auto|SIZE idle=DURATION rate=N max-extents=N\n" \
  "on-full=forward|drop flush-discards=BOOL passthrough=BOOL\n" \
  "thin=BOOL slot=SIZE size=SIZE meta=FILE   Thin mode (slot map).\n" \
  "ctl=PATH|none    Control socket for discardctl (default: per pid).\n" \
  "state=FILE       Keep pending discards across a clean restart.\n" \
  "statsfile=FILE   Write the statistics as JSON here at exit.\n" \
  "See nbdkit-discardcache-plugin(1)."

/* Open the backend before serving, so a bad one is an error at start. */
static int
discardcache_get_ready (void)
{
  engine = engine_open (&cfg);
  return engine ? 0 : -1;
}

static int
discardcache_after_fork (void)
{
  return engine_start (engine);
}

static void
log_stats_line (const char *line, void *opaque)
{
  nbdkit_debug ("stats: %s", line);
}

static void
discardcache_cleanup (void)
{
  struct engine_stats st;

  if (engine == NULL)
    return;
  engine_stop (engine, STOP_TIMEOUT_MS);
  engine_get_stats (engine, &st);
  if (discardcache_debug_stats)
    stats_write_lines (&st, log_stats_line, NULL);
  if (statsfile)
    stats_write_file (&st, statsfile);
}

static void
discardcache_dump_plugin (void)
{
  printf ("discardcache_backends=file,blkdev,nbd\n");
  printf ("discardcache_statsfile=yes\n");
  printf ("discardcache_ctl=yes\n");
  printf ("discardcache_ctl_protocol=%d\n", CTL_PROTOCOL_VERSION);
  printf ("discardcache_state=zstd\n");
  printf ("discardcache_thin=yes\n");
}

static void *
discardcache_open (int readonly)
{
  /* The engine is shared by every connection; any non-NULL handle. */
  return engine;
}

static int64_t
discardcache_get_size (void *handle)
{
  return engine_size (engine);
}

static int
discardcache_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                         uint32_t *maximum)
{
  const struct backend_limits *lim = engine_limits (engine);

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
  return !engine_limits (engine)->read_only;
}

static int
discardcache_can_flush (void *handle)
{
  return 1;
}

static int
discardcache_can_trim (void *handle)
{
  return !engine_limits (engine)->read_only;
}

static int
discardcache_can_zero (void *handle)
{
  return !engine_limits (engine)->read_only;
}

static int
discardcache_can_fast_zero (void *handle)
{
  return engine_limits (engine)->can_zero;
}

static int
discardcache_can_fua (void *handle)
{
  return engine_limits (engine)->can_fua ? NBDKIT_FUA_NATIVE
                                          : NBDKIT_FUA_EMULATE;
}

/* Every connection shares the one backend handle, so a flush on any
 * connection covers writes made on all of them, when the backend's own
 * flush does.
 */
static int
discardcache_can_multi_conn (void *handle)
{
  return engine_limits (engine)->can_multi_conn;
}

static int
discardcache_can_extents (void *handle)
{
  return engine_limits (engine)->can_extents;
}

static int
discardcache_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                    uint32_t flags)
{
  return engine_pread (engine, buf, count, offset);
}

static int
discardcache_pwrite (void *handle, const void *buf, uint32_t count,
                     uint64_t offset, uint32_t flags)
{
  return engine_pwrite (engine, buf, count, offset, flags & NBDKIT_FLAG_FUA);
}

static int
discardcache_zero (void *handle, uint32_t count, uint64_t offset,
                   uint32_t flags)
{
  return engine_zero (engine, offset, count, flags & NBDKIT_FLAG_MAY_TRIM,
                      flags & NBDKIT_FLAG_FUA, flags & NBDKIT_FLAG_FAST_ZERO);
}

static int
discardcache_trim (void *handle, uint32_t count, uint64_t offset,
                   uint32_t flags)
{
  return engine_trim (engine, offset, count, flags & NBDKIT_FLAG_FUA);
}

static int
discardcache_flush (void *handle, uint32_t flags)
{
  return engine_flush (engine);
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
  return engine_extents (engine, offset, count, add_extent, extents);
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
  .config_help        = discardcache_config_help,
  .magic_config_key   = "backend",
  .get_ready          = discardcache_get_ready,
  .after_fork         = discardcache_after_fork,
  .cleanup            = discardcache_cleanup,
  .dump_plugin        = discardcache_dump_plugin,
  .open               = discardcache_open,
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
