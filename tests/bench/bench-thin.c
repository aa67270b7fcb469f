/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode's microbenchmark, for tests/bench/run (the
 * thin workload's memory part).  Prints "key value" lines:
 *
 *   map_runs, map_bytes_per_run    a map of RUNS runs (logical slot 2i
 *                                  on physical 2i, so none join): the
 *                                  map's own bytes per run, built in
 *                                  order (as a checkpoint loads it)
 *   map_bytes_per_run_random       the same map built in random order
 *                                  (as writes into random places do)
 *   memory_bytes_per_run           ... with the free space maps, per run
 *                                  of either kind
 *   checkpoint_bytes, load_s       a meta file holding those runs, and
 *                                  the time thin mode takes to open it
 *                                  (recovery, free space, which slots
 *                                  read as zeros) over a sparse file
 *   pending_runs                   PENDING
 *   pick_ns_small, pick_ns_large   the allocator's best-fit pick and
 *                                  take, per slot, with 1000 and with
 *                                  PENDING lone pending runs
 *   alloc_us_small, alloc_us_large a 4 KiB write into a new slot through
 *                                  the volume (a pending slot found best
 *                                  fit, its discard cancelled), with
 *                                  1000 and PENDING pending runs
 *
 *   bench-thin [-n RUNS] [-p PENDING] [-d DIR]
 * DIR (default /tmp) takes a sparse file of 2 x RUNS x 4 KiB and the
 * meta file, both removed at the end.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "thin-pure.h"
#include "volume.h"

#define SLOT 4096

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
die (const char *what)
{
  fprintf (stderr, "bench-thin: %s: %s\n", what, strerror (errno));
  exit (1);
}

/* ns per best-fit pick and take, with `runs' lone pending slots. */
static double
pick_ns (uint64_t runs)
{
  uint64_t picks = runs < 100000 ? runs : 100000;
  struct thin_space s;
  struct extent x;
  double t0;

  if (thin_space_init (&s) == -1)
    die ("thin_space_init");
  for (uint64_t i = 0; i < runs; i++)
    thin_space_add_pending (&s, 2 * i, 1);
  t0 = now ();
  for (uint64_t i = 0; i < picks; i++)
    if (!thin_space_best_pending (&s, 1, &x) ||
        thin_space_take (&s, x.offset, 1) == -1)
      die ("pick");
  t0 = now () - t0;
  thin_space_free (&s);
  return t0 * 1e9 / picks;
}

/* Bytes per run of a map of runs runs inserted in a random order. */
static double
random_map_bytes (uint64_t runs)
{
  uint64_t *order = malloc (runs * sizeof *order), seed = 1;
  struct thin_map m;
  double bytes;

  if (order == NULL || thin_map_init (&m, 2 * runs, 2 * runs) == -1)
    die ("random map");
  for (uint64_t i = 0; i < runs; i++)
    order[i] = i;
  for (uint64_t i = runs; i > 1; i--) {     /* Fisher-Yates, xorshift */
    uint64_t j, t;

    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    j = seed % i;
    t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
  for (uint64_t i = 0; i < runs; i++)
    if (thin_map_add (&m, 2 * order[i], 1, (uint32_t) (2 * order[i])) == -1)
      die ("thin_map_add");
  bytes = (double) thin_map_memory (&m) / thin_map_runs (&m);
  thin_map_free (&m);
  free (order);
  return bytes;
}

/* The meta file: logical 2i on physical 2i, for i < runs. */
static void
write_meta (const char *path, const struct thin_meta_id *id, uint64_t runs)
{
  struct thin_map m;
  void *img;
  size_t len;
  int fd;

  if (thin_map_init (&m, id->size / SLOT, id->backend_size / SLOT) == -1)
    die ("thin_map_init");
  for (uint64_t i = 0; i < runs; i++)
    if (thin_map_add (&m, 2 * i, 1, (uint32_t) (2 * i)) == -1)
      die ("thin_map_add");
  printf ("map_runs %" PRIu64 "\n", thin_map_runs (&m));
  printf ("map_bytes_per_run %.1f\n",
          (double) thin_map_memory (&m) / thin_map_runs (&m));
  printf ("map_bytes_per_run_random %.1f\n", random_map_bytes (runs));
  if (thin_checkpoint_encode (id, m.runs, NULL, 1, 0, &img, &len) == -1)
    die ("thin_checkpoint_encode");
  thin_map_free (&m);
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd == -1 || write (fd, img, len) != (ssize_t) len || close (fd) == -1)
    die (path);
  printf ("checkpoint_bytes %zu\n", len);
  free (img);
}

/* Microseconds per 4 KiB write into a new slot, count of them, each
 * far from any mapped slot (so no stream continues into it).
 */
static double
alloc_us (struct volume *v, uint64_t from, uint64_t count)
{
  static char buf[4096];
  double t0 = now ();

  memset (buf, 0x5a, sizeof buf);
  for (uint64_t i = 0; i < count; i++)
    if (volume_pwrite (v, buf, sizeof buf, (from + 4 * i) * SLOT, false) == -1)
      die ("volume_pwrite");
  return (now () - t0) * 1e6 / count;
}

/* Trim count mapped slots, every other one from slot `first', and
 * commit: count lone pending runs.
 */
static void
free_pending (struct volume *v, uint64_t first, uint64_t count)
{
  for (uint64_t i = 0; i < count; i++)
    if (volume_trim (v, (first + 4 * i) * SLOT, SLOT, false) == -1)
      die ("volume_trim");
  if (volume_flush (v) == -1)
    die ("volume_flush");
}

int
main (int argc, char *argv[])
{
  uint64_t runs = 1000000, pending = 100000;
  const char *dir = "/tmp";
  char file[4096], meta[4096];
  struct engine_config ecfg;
  struct volume_config vcfg;
  struct thin_meta_id id;
  struct volume_stats st;
  struct backend *b;
  struct engine *e;
  struct volume *v;
  double t0;
  int c;

  while ((c = getopt (argc, argv, "n:p:d:")) != -1) {
    switch (c) {
    case 'n': runs = strtoull (optarg, NULL, 0); break;
    case 'p': pending = strtoull (optarg, NULL, 0); break;
    case 'd': dir = optarg; break;
    default:
      fprintf (stderr, "usage: bench-thin [-n RUNS] [-p PENDING] [-d DIR]\n");
      return 2;
    }
  }
  if (runs < 4 * pending || pending < 2000) {
    fprintf (stderr, "bench-thin: need RUNS >= 4 x PENDING, PENDING >= 2000\n");
    return 2;
  }
  printf ("pending_runs %" PRIu64 "\n", pending);
  printf ("pick_ns_small %.0f\n", pick_ns (1000));
  printf ("pick_ns_large %.0f\n", pick_ns (pending));

  snprintf (file, sizeof file, "%s/bench-thin.%d.img", dir, getpid ());
  snprintf (meta, sizeof meta, "%s/bench-thin.%d.meta", dir, getpid ());
  if (truncate (file, 0) == -1 && errno != ENOENT)
    die (file);
  c = open (file, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (c == -1 || ftruncate (c, 2 * runs * SLOT) == -1 || close (c) == -1)
    die (file);
  b = backend_open (file, false);
  engine_config_init (&ecfg);
  ecfg.delay_ms = 3600 * 1000;
  e = b ? engine_open (&ecfg, b) : NULL;
  if (e == NULL)
    die ("engine_open");
  id = (struct thin_meta_id) {
    .slot = SLOT, .size = 16 * runs * SLOT, .backend_size = 2 * runs * SLOT,
    .backend = *engine_saved_identity (e),
  };
  write_meta (meta, &id, runs);

  volume_config_init (&vcfg);
  vcfg.thin = true;
  vcfg.slot = SLOT;
  vcfg.size = id.size;
  vcfg.meta = strdup (meta);
  /* Freed runs go pending, as they did before the reuse reserve (which
   * orders its runs in the same structure, struct thin_freed).
   */
  vcfg.reserve = 0;
  t0 = now ();
  v = volume_open (e, &vcfg);
  if (v == NULL)
    die ("volume_open");
  printf ("load_s %.3f\n", now () - t0);
  volume_get_stats (v, &st);
  printf ("memory_bytes_per_run %.1f\n", (double) st.th.memory_bytes /
          (st.th.mapped_runs + st.th.free_clean_runs));

  /* Pending runs from the mapped slots 2i: trim every other one. */
  free_pending (v, 0, 1000);
  printf ("alloc_us_small %.2f\n", alloc_us (v, 8 * runs, 1000));
  free_pending (v, 8000, pending);
  printf ("alloc_us_large %.2f\n", alloc_us (v, 8 * runs + 8000, 1000));
  volume_get_stats (v, &st);
  printf ("pending_runs_after %" PRIu64 "\n", st.th.free_pending_runs);

  volume_close (v);
  engine_close (e);
  volume_config_free (&vcfg);
  engine_config_free (&ecfg);
  unlink (file);
  unlink (meta);
  return 0;
}
