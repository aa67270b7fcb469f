/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: a device model whose TRIM costs a + b * length
 * (trimcost-base-us=A, trimcost-us-per-mib=B), for the pacing tests and
 * benchmarks.  nbdkit's delay filter only gives a fixed delay per
 * command.  With trimcost-exclusive=true a trim also holds the device
 * alone while it sleeps (a non-queued TRIM): requests that arrive wait
 * for it, and it waits for those already running.  The lock prefers the
 * trim, as the device drains its queue for one.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <nbdkit-filter.h>

static uint64_t base_us;
static uint64_t us_per_mib;
static bool exclusive;
static pthread_rwlock_t device;

static int
trimcost_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  int r;

  if (strcmp (key, "trimcost-base-us") == 0)
    return nbdkit_parse_uint64_t (key, value, &base_us);
  if (strcmp (key, "trimcost-us-per-mib") == 0)
    return nbdkit_parse_uint64_t (key, value, &us_per_mib);
  if (strcmp (key, "trimcost-exclusive") == 0) {
    if ((r = nbdkit_parse_bool (value)) == -1)
      return -1;
    exclusive = r;
    return 0;
  }
  return next (nxdata, key, value);
}

static void
trimcost_load (void)
{
  pthread_rwlockattr_t attr;

  pthread_rwlockattr_init (&attr);
  pthread_rwlockattr_setkind_np (&attr,
                                 PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init (&device, &attr);
  pthread_rwlockattr_destroy (&attr);
}

static void
trimcost_unload (void)
{
  pthread_rwlock_destroy (&device);
}

static void
sleep_us (uint64_t us)
{
  struct timespec ts = { .tv_sec = us / 1000000,
                         .tv_nsec = (long) (us % 1000000) * 1000 };

  while (nanosleep (&ts, &ts) == -1 && errno == EINTR)
    ;
}

/* Every other request shares the device; only a trim may hold it alone. */
static void
shared_begin (void)
{
  if (exclusive)
    pthread_rwlock_rdlock (&device);
}

static void
shared_end (void)
{
  if (exclusive)
    pthread_rwlock_unlock (&device);
}

static int
trimcost_trim (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  int r;

  if (exclusive)
    pthread_rwlock_wrlock (&device);
  sleep_us (base_us + us_per_mib * count / (1024 * 1024));
  r = next->trim (next, count, offset, flags, err);
  if (exclusive)
    pthread_rwlock_unlock (&device);
  return r;
}

static int
trimcost_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  int r;

  shared_begin ();
  r = next->pread (next, buf, count, offset, flags, err);
  shared_end ();
  return r;
}

static int
trimcost_pwrite (nbdkit_next *next, void *handle, const void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  int r;

  shared_begin ();
  r = next->pwrite (next, buf, count, offset, flags, err);
  shared_end ();
  return r;
}

static int
trimcost_zero (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  int r;

  shared_begin ();
  r = next->zero (next, count, offset, flags, err);
  shared_end ();
  return r;
}

static int
trimcost_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  int r;

  shared_begin ();
  r = next->flush (next, flags, err);
  shared_end ();
  return r;
}

static struct nbdkit_filter filter = {
  .name = "trimcost",
  .longname = "discardcache test filter: trims cost a + b * length",
  .load = trimcost_load,
  .unload = trimcost_unload,
  .config = trimcost_config,
  .config_help =
    "trimcost-base-us=N      Each trim sleeps N us (0) ...\n"
    "trimcost-us-per-mib=N   ... plus N us per MiB it covers (0).\n"
    "trimcost-exclusive=BOOL Other requests wait while a trim runs (false).",
  .trim = trimcost_trim,
  .pread = trimcost_pread,
  .pwrite = trimcost_pwrite,
  .zero = trimcost_zero,
  .flush = trimcost_flush,
};

/* NBDKIT_REGISTER_FILTER defines filter_init without a prototype. */
struct nbdkit_filter *filter_init (void);
NBDKIT_REGISTER_FILTER (filter)
