/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the state file (invariant 4), through the engine and
 * the in-memory backend: a clean stop saves exactly the pending set
 * instead of forwarding it and the next start loads and consumes it;
 * corrupt, truncated, foreign and mismatched files are refused, set
 * aside and never applied; the known-clean map travels with them and
 * version 1 files still load; and the format's own checks, size and
 * speed on a million extents.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "engine-util.h"
#include "mem-backend.h"
#include "scratch.h"
#include "state.h"

#define DISK (16 * MiB)
#define GRAN 4096

static char dir[64];
static char path[128];
static char rejected[160];

struct saved {
  size_t n;
  struct extent *x;
};

static int
setup (void **state)
{
  scratch_make (dir, sizeof dir, "dc-state");
  snprintf (path, sizeof path, "%s/state", dir);
  snprintf (rejected, sizeof rejected, "%s.rejected", path);
  return 0;
}

static int
teardown (void **state)
{
  scratch_remove (dir);
  return 0;
}

static bool
exists (const char *p)
{
  return access (p, F_OK) == 0;
}

static struct engine *
open_engine (struct mem_backend **memp, uint64_t size, const char *name,
             const char *const *keys)
{
  /* The state file of a clean stop alone (test-journal: the journal). */
  const char *const defaults[] = {
    "delay", "1h", "journal", "off", "state", path, NULL,
  };
  struct mem_backend *mem = mem_backend_new (size, GRAN, 64 * MiB);
  struct engine *e;

  snprintf (mem->b.identity.name, sizeof mem->b.identity.name, "%s", name);
  e = try_open_engine_on (mem, defaults, keys);
  if (memp)
    *memp = mem;
  return e;
}

/* Every pending extent, through the dump interface, in small batches so
 * that batching itself is exercised.
 */
static struct saved
dump (struct engine *e)
{
  struct saved s = { 0, NULL };
  struct extent batch[7];
  uint64_t from = 0;
  uint32_t now;
  size_t n;

  while ((n = engine_dump_batch (e, from, batch, 7, &now)) > 0) {
    s.x = realloc (s.x, (s.n + n) * sizeof *s.x);
    assert_non_null (s.x);
    for (size_t i = 0; i < n; i++) {
      s.x[s.n + i] = batch[i];
      s.x[s.n + i].time = now - batch[i].time;      /* now the age */
    }
    s.n += n;
    from = batch[n - 1].offset + batch[n - 1].length;
  }
  return s;
}

static size_t
count (struct engine *e)
{
  struct saved s = dump (e);

  free (s.x);
  return s.n;
}

/* Aligned extents, sub-granule fragments and odd offsets. */
static void
trim_pattern (struct engine *e)
{
  for (int i = 0; i < 50; i++)
    assert_int_equal (engine_trim (e, i * 64 * KiB, 8 * KiB + i * 512, false), 0);
  assert_int_equal (engine_trim (e, 8 * MiB + 100, 3000, false), 0);
  assert_int_equal (engine_trim (e, DISK - 4096, 4096, false), 0);
}

static struct saved
save_pattern (void)
{
  struct mem_backend *mem;
  struct engine *e = open_engine (&mem, DISK, "mem", NULL);
  struct mem_discard c[8];
  struct saved before;

  assert_non_null (e);
  trim_pattern (e);
  before = dump (e);
  assert_int_equal (before.n, 52);
  engine_stop (e, 10000);
  /* Saved instead of forwarded. */
  assert_int_equal (mem_backend_calls (mem, c, 8), 0);
  engine_close (e);
  assert_true (exists (path));
  return before;
}

static void
test_roundtrip (void **state)
{
  struct saved before = save_pattern (), after;
  struct mem_backend *mem;
  struct mem_discard c[8];
  struct engine *e;
  struct stat st;

  assert_int_equal (stat (path, &st), 0);
  assert_int_equal (st.st_mode & 0777, 0600);
  sleep (1);
  e = open_engine (&mem, DISK, "mem", NULL);
  assert_non_null (e);
  /* Consumed before the first request could be served. */
  assert_false (exists (path));
  assert_false (exists (rejected));
  after = dump (e);
  assert_int_equal (after.n, before.n);
  for (size_t i = 0; i < after.n; i++) {
    assert_int_equal (after.x[i].offset, before.x[i].offset);
    assert_int_equal (after.x[i].length, before.x[i].length);
    /* Queued again at load: they wait their delay from now. */
    assert_true (after.x[i].time < 500);
  }
  assert_int_equal (mem_backend_calls (mem, c, 8), 0);
  /* A crash now leaves nothing that could be replayed. */
  assert_false (exists (path));
  engine_close (e);
  free (before.x);
  free (after.x);
}

/* A front-end that fails between open and start only closes: what was
 * pending (loaded, say) is still saved, not lost.
 */
static void
test_close_without_stop_saves (void **state)
{
  struct engine *e = open_engine (NULL, DISK, "mem", NULL);

  assert_non_null (e);
  trim_pattern (e);
  engine_close (e);
  assert_true (exists (path));
  e = open_engine (NULL, DISK, "mem", NULL);
  assert_non_null (e);
  assert_int_equal (count (e), 52);
  engine_stop (e, 1000);
  engine_close (e);
}

static void
test_missing_is_normal (void **state)
{
  struct engine *e = open_engine (NULL, DISK, "mem", NULL);

  assert_non_null (e);
  assert_int_equal (count (e), 0);
  engine_close (e);
  assert_false (exists (path));
}

static void
test_nothing_pending_writes_nothing (void **state)
{
  struct engine *e = open_engine (NULL, DISK, "mem", NULL);

  assert_non_null (e);
  engine_stop (e, 1000);
  engine_close (e);
  assert_false (exists (path));
}

/* Run engine_stop and engine_close with stderr (and debug messages)
 * going to a file; returns what they logged (to free).
 */
static char *
logged_stop_and_close (struct engine *e)
{
  char log[160];
  FILE *fp;
  char *text;
  long len;
  int saved = dup (STDERR_FILENO), fd;

  snprintf (log, sizeof log, "%s/stop.log", dir);
  fd = open (log, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true (saved >= 0 && fd >= 0);
  fflush (stderr);
  dup2 (fd, STDERR_FILENO);
  setenv ("DISCARDCACHE_DEBUG", "1", 1);
  engine_stop (e, 1000);
  engine_close (e);
  fflush (stderr);
  unsetenv ("DISCARDCACHE_DEBUG");
  dup2 (saved, STDERR_FILENO);
  close (saved);
  close (fd);
  fp = fopen (log, "r");
  assert_non_null (fp);
  fseek (fp, 0, SEEK_END);
  len = ftell (fp);
  rewind (fp);
  text = calloc (1, len + 1);
  assert_non_null (text);
  assert_int_equal (fread (text, 1, len, fp), (size_t) len);
  fclose (fp);
  return text;
}

static unsigned
occurrences (const char *text, const char *what)
{
  unsigned n = 0;

  for (const char *p = text; (p = strstr (p, what)) != NULL; p++)
    n++;
  return n;
}

/* The state file cannot be written (its temporary name is taken by a
 * directory): the stop says so once, forwards instead, logs what is left
 * once, and never claims that anything was saved; engine_close does not
 * stop (and save) a second time.
 */
static void
assert_failed_save_told_once (bool with_fragments)
{
  char tmp[160];
  struct engine *e = open_engine (NULL, DISK, "mem", NULL);
  char *log;

  assert_non_null (e);
  if (with_fragments)
    trim_pattern (e);
  else
    assert_int_equal (engine_trim (e, 0, 64 * KiB, false), 0);
  snprintf (tmp, sizeof tmp, "%s.tmp", path);
  assert_int_equal (mkdir (tmp, 0700), 0);
  log = logged_stop_and_close (e);
  rmdir (tmp);
  assert_false (exists (path));
  if (occurrences (log, "cannot create") != 1 ||
      occurrences (log, "at stop") != (with_fragments ? 1 : 0) ||
      occurrences (log, "saved to") != 0 ||
      occurrences (log, "not saved") != 1)
    fail_msg ("the stop's log:\n%s", log);
  free (log);
}

static void
test_failed_save_told_once (void **state)
{
  assert_failed_save_told_once (true);
  assert_failed_save_told_once (false);
}

/* Start against a file that must be refused: nothing applied, the file
 * set aside as FILE.rejected, the engine serving.
 */
static void
assert_refused (uint64_t size, const char *name, const char *const *keys)
{
  struct engine *e = open_engine (NULL, size, name, keys);

  assert_non_null (e);
  assert_int_equal (count (e), 0);
  assert_false (exists (path));
  assert_true (exists (rejected));
  engine_close (e);
  unlink (rejected);
}

static void
rewrite (void (*change) (unsigned char *buf, size_t *len))
{
  unsigned char buf[65536];
  size_t len;
  int fd = open (path, O_RDWR);

  assert_true (fd >= 0);
  len = read (fd, buf, sizeof buf);
  change (buf, &len);
  assert_int_equal (ftruncate (fd, 0), 0);
  assert_int_equal (pwrite (fd, buf, len, 0), (ssize_t) len);
  close (fd);
}

static void
flip_payload (unsigned char *buf, size_t *len)
{
  buf[*len - 5] ^= 0x40;
}

static void
flip_header (unsigned char *buf, size_t *len)
{
  buf[40] ^= 1;                 /* the size field */
}

static void
truncate_half (unsigned char *buf, size_t *len)
{
  *len /= 2;
}

static void
next_version (unsigned char *buf, size_t *len)
{
  uint32_t crc;

  buf[8] = STATE_VERSION + 1;
  crc = state_checksum (buf, *len);
  for (int i = 0; i < 4; i++)
    buf[104 + i] = crc >> (8 * i);
}

/* Declares one extent more than the payload holds, checksum valid: the
 * payload decodes fine up to its end, so only validating it all before
 * applying any keeps the first 52 extents out.
 */
static void
one_more_extent (unsigned char *buf, size_t *len)
{
  uint32_t crc;

  buf[64]++;
  crc = state_checksum (buf, *len);
  for (int i = 0; i < 4; i++)
    buf[104 + i] = crc >> (8 * i);
}

static void
test_corrupt_refused (void **state)
{
  free (save_pattern ().x);
  rewrite (flip_payload);
  assert_refused (DISK, "mem", NULL);
  free (save_pattern ().x);
  rewrite (flip_header);
  assert_refused (DISK, "mem", NULL);
  free (save_pattern ().x);
  rewrite (one_more_extent);
  assert_refused (DISK, "mem", NULL);
}

static void
test_truncated_refused (void **state)
{
  free (save_pattern ().x);
  rewrite (truncate_half);
  assert_refused (DISK, "mem", NULL);
}

static void
test_other_version_refused (void **state)
{
  free (save_pattern ().x);
  rewrite (next_version);
  assert_refused (DISK, "mem", NULL);
}

static void
test_other_backend_refused (void **state)
{
  static const char *const coarser[] = { "granularity", "64k", NULL };

  free (save_pattern ().x);
  assert_refused (DISK * 2, "mem", NULL);          /* other size */
  free (save_pattern ().x);
  assert_refused (DISK, "mem2", NULL);             /* other name */
  free (save_pattern ().x);
  assert_refused (DISK, "mem", coarser);           /* other granularity */
}

/* A read-only start neither applies nor consumes it. */
static void
test_read_only_leaves_it (void **state)
{
  struct mem_backend *mem = mem_backend_new (DISK, GRAN, 64 * MiB);
  struct engine_config cfg;
  struct engine *e;

  free (save_pattern ().x);
  engine_config_init (&cfg);
  cfg.journal = false;
  assert_int_equal (engine_config_set (&cfg, "state", path), 0);
  mem->b.limits.read_only = true;
  e = engine_open (&cfg, &mem->b);
  engine_config_free (&cfg);
  assert_non_null (e);
  assert_int_equal (count (e), 0);
  assert_true (exists (path));
  engine_close (e);
  assert_true (exists (path));
}

/* Loading more than max-extents keeps the bound: the oldest go out. */
static void
test_load_keeps_bound (void **state)
{
  static const char *const small[] = { "max-extents", "10", NULL };
  struct mem_backend *mem;
  struct mem_discard c[64];
  struct engine *e;

  free (save_pattern ().x);
  e = open_engine (&mem, DISK, "mem", small);
  assert_non_null (e);
  assert_true (count (e) <= 10);
  assert_true (mem_backend_calls (mem, c, 64) > 0);
  engine_close (e);
}

/* The format alone: every truncation and every bit flip of a valid
 * image is refused before anything is decoded.
 */
static void
test_format_damage (void **state)
{
  struct state_identity id = { .kind = "mem", .size = DISK, .granularity = GRAN,
                               .name = "mem" };
  struct state_encoder *enc = state_encoder_new (512, GRAN);
  struct state_header h;
  unsigned char *img;
  void *image;
  size_t len;
  char why[256];

  assert_non_null (enc);
  for (int i = 0; i < 20; i++)
    assert_int_equal (state_encoder_add (enc, STATE_PENDING, i * 16384,
                                         1024 + i * 512), 0);
  /* Out of order, overlapping, not in the unit: refused. */
  assert_int_equal (state_encoder_add (enc, STATE_PENDING, 0, 512), -1);
  assert_int_equal (state_encoder_add (enc, STATE_PENDING, 1 << 20, 100), -1);
  /* The clean list starts again from 0, in its own unit. */
  assert_int_equal (state_encoder_add (enc, STATE_CLEAN, 0, GRAN), 0);
  assert_int_equal (state_encoder_add (enc, STATE_CLEAN, 8 * MiB, 512), -1);
  assert_int_equal (state_encoder_add (enc, STATE_CLEAN, 8 * MiB, GRAN), 0);
  /* No pending extent after a clean one. */
  assert_int_equal (state_encoder_add (enc, STATE_PENDING, 15 * MiB, 512), -1);
  assert_int_equal (state_encoder_finish (enc, &id, &image, &len), 0);
  state_encoder_free (enc);
  img = image;

  assert_int_equal (state_read_header (img, len, &h, why, sizeof why), 0);
  assert_int_equal (state_check_identity (&h, &id, why, sizeof why), 0);
  assert_int_equal (state_decode_extents (img, &h, NULL, NULL, why, sizeof why), 0);
  assert_int_equal (h.version, STATE_VERSION);
  assert_int_equal (h.count, 20);
  assert_int_equal (h.clean_count, 2);
  assert_int_equal (h.clean_bytes, 2 * GRAN);
  for (size_t n = 0; n < len; n++)
    assert_int_equal (state_read_header (img, n, &h, why, sizeof why), -1);
  for (size_t bit = 0; bit < len * 8; bit++) {
    img[bit / 8] ^= 1 << (bit % 8);
    assert_int_equal (state_read_header (img, len, &h, why, sizeof why), -1);
    img[bit / 8] ^= 1 << (bit % 8);
  }
  id.size--;
  assert_int_equal (state_read_header (img, len, &h, why, sizeof why), 0);
  assert_int_equal (state_check_identity (&h, &id, why, sizeof why), -1);
  assert_non_null (strstr (why, "bytes"));
  free (image);
}

/* Known clean (invariant 9): [10M, +256K) and [12M, +64K), away from
 * trim_pattern's ranges.  Two discards reach the backend.
 */
static void
make_clean (struct engine *e)
{
  assert_int_equal (engine_trim (e, 10 * MiB, 256 * KiB, false), 0);
  assert_int_equal (engine_trim (e, 12 * MiB, 64 * KiB, false), 0);
  assert_int_equal (engine_drain (e, NULL, NULL), 0);
}

static void
assert_clean_loaded (struct engine *e)
{
  struct engine_stats st;

  assert_true (engine_known_clean (e, 10 * MiB, 256 * KiB));
  assert_true (engine_known_clean (e, 12 * MiB, 64 * KiB));
  assert_false (engine_known_clean (e, 11 * MiB, 4 * KiB));
  engine_get_stats (e, &st);
  assert_int_equal (st.clean_extents, 2);
  assert_int_equal (st.state_loaded_clean_extents, 2);
  assert_int_equal (st.state_loaded_clean_bytes, 320 * KiB);
}

/* The known-clean map crosses a clean restart with the pending extents:
 * the same ranges, consumed with the file, and TRIMs over them are
 * still not sent.
 */
static void
test_clean_roundtrip (void **state)
{
  struct mem_backend *mem;
  struct mem_discard c[8];
  struct engine_stats st;
  struct engine *e = open_engine (&mem, DISK, "mem", NULL);

  assert_non_null (e);
  make_clean (e);
  trim_pattern (e);
  engine_stop (e, 10000);
  assert_int_equal (mem_backend_calls (mem, c, 8), 2);
  engine_close (e);
  assert_true (exists (path));

  e = open_engine (&mem, DISK, "mem", NULL);
  assert_non_null (e);
  assert_false (exists (path));
  assert_int_equal (count (e), 52);
  assert_clean_loaded (e);
  assert_int_equal (engine_trim (e, 10 * MiB, 256 * KiB, false), 0);
  assert_int_equal (count (e), 52);
  engine_get_stats (e, &st);
  assert_int_equal (st.already_clean_bytes, 256 * KiB);
  assert_int_equal (mem_backend_calls (mem, c, 8), 0);
  engine_close (e);
}

/* Nothing pending but something known clean: still worth a file. */
static void
test_clean_only_saved (void **state)
{
  struct engine *e = open_engine (NULL, DISK, "mem", NULL);

  assert_non_null (e);
  make_clean (e);
  engine_close (e);
  assert_true (exists (path));
  e = open_engine (NULL, DISK, "mem", NULL);
  assert_non_null (e);
  assert_int_equal (count (e), 0);
  assert_clean_loaded (e);
  engine_stop (e, 1000);
  engine_close (e);
}

/* Loading keeps max-clean-extents (the oldest forgotten), and with the
 * map off loads no clean range at all; the file is consumed either way.
 */
static void
test_clean_load_bound_and_off (void **state)
{
  static const char *const one[] = { "max-clean-extents", "1", NULL };
  static const char *const off[] = { "max-clean-extents", "off", NULL };
  struct engine_stats st;
  struct engine *e = open_engine (NULL, DISK, "mem", NULL);

  assert_non_null (e);
  make_clean (e);
  engine_close (e);
  e = open_engine (NULL, DISK, "mem", one);
  assert_non_null (e);
  assert_false (exists (path));
  engine_get_stats (e, &st);
  assert_int_equal (st.clean_extents, 1);
  assert_int_equal (st.clean_forgotten_bytes, 256 * KiB);
  assert_true (engine_known_clean (e, 12 * MiB, 64 * KiB));
  engine_close (e);
  e = open_engine (NULL, DISK, "mem", off);
  assert_non_null (e);
  assert_false (exists (path));
  assert_false (engine_known_clean (e, 12 * MiB, 64 * KiB));
  engine_close (e);
  assert_false (exists (path));
}

/* A refused file applies no known-clean range either. */
static void
test_clean_refused (void **state)
{
  struct engine *e = open_engine (NULL, DISK, "mem", NULL);

  assert_non_null (e);
  make_clean (e);
  engine_close (e);
  e = open_engine (NULL, DISK, "mem2", NULL);
  assert_non_null (e);
  assert_true (exists (rejected));
  assert_false (engine_known_clean (e, 10 * MiB, 4 * KiB));
  engine_close (e);
}

/* The file as version 1 wrote it: a 112-byte header without the
 * known-clean fields, the same payload when the clean list is empty.
 */
static void
to_version_1 (unsigned char *buf, size_t *len)
{
  uint32_t crc;

  for (int i = STATE_V1_HEADER_SIZE; i < STATE_HEADER_SIZE; i++)
    assert_int_equal (buf[i], 0);
  memmove (buf + STATE_V1_HEADER_SIZE, buf + STATE_HEADER_SIZE,
           *len - STATE_HEADER_SIZE);
  *len -= STATE_HEADER_SIZE - STATE_V1_HEADER_SIZE;
  buf[8] = 1;
  buf[12] = STATE_V1_HEADER_SIZE;
  crc = state_checksum (buf, *len);
  for (int i = 0; i < 4; i++)
    buf[104 + i] = crc >> (8 * i);
}

static void
test_version_1_loads (void **state)
{
  struct saved before = save_pattern ();
  struct engine_stats st;
  struct engine *e;

  rewrite (to_version_1);
  e = open_engine (NULL, DISK, "mem", NULL);
  assert_non_null (e);
  assert_false (exists (path));
  assert_false (exists (rejected));
  assert_int_equal (count (e), before.n);
  engine_get_stats (e, &st);
  assert_int_equal (st.state_loaded_extents, 52);
  assert_int_equal (st.state_loaded_clean_extents, 0);
  engine_close (e);
  free (before.x);
}

static int
count_lists (enum state_list list, uint64_t offset, uint64_t length,
             void *opaque)
{
  ((uint64_t *) opaque)[list]++;
  return 0;
}

/* A file written by version 1's own encoder (the fuzz corpus kept it). */
static void
test_version_1_file_decodes (void **state)
{
  const char *top = getenv ("abs_top_srcdir");
  unsigned char buf[4096];
  struct state_header h;
  uint64_t n[2] = { 0, 0 };
  char file[4096], why[256];
  ssize_t len;
  int fd;

  if (top == NULL)
    skip ();
  snprintf (file, sizeof file, "%s/tests/fuzz/corpus-state/v1-file-aligned",
            top);
  fd = open (file, O_RDONLY);
  assert_true (fd >= 0);
  len = read (fd, buf, sizeof buf);
  close (fd);
  assert_true (len > 0);
  assert_int_equal (state_read_header (buf, len, &h, why, sizeof why), 0);
  assert_int_equal (h.version, 1);
  assert_int_equal (h.count, 3);
  assert_int_equal (h.clean_count, 0);
  assert_int_equal (state_decode_extents (buf, &h, count_lists, n, why,
                                          sizeof why), 0);
  assert_int_equal (n[STATE_PENDING], 3);
  assert_int_equal (n[STATE_CLEAN], 0);
}

static double
seconds_since (const struct timespec *t0)
{
  struct timespec t;

  clock_gettime (CLOCK_MONOTONIC, &t);
  return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* One million extents through the engine: saved and loaded within a few
 * seconds, the file well under 4 bytes an extent for regular patterns.
 * Extent i follows a gap of gap(i) units and is len(i) units long.  The
 * encoding counts in the largest power of two dividing every offset and
 * length, so 16-byte units encode exactly as 4 KiB-aligned extents of
 * the same shape would, on a disk the in-memory backend can hold.
 */
static void
million (const char *name, uint64_t unit, uint64_t (*gap) (uint64_t),
         uint64_t (*len) (uint64_t), double max_bytes_per_extent)
{
  static const char *const big[] = { "max-extents", "2M", NULL };
  const uint64_t n = 1000000;
  uint64_t off = 0, disk;
  struct engine *e;
  struct timespec t0;
  struct stat st;
  double save_s, load_s;

  for (uint64_t i = 0; i < n; i++)
    off += (gap (i) + len (i)) * unit;
  disk = off + unit;
  e = open_engine (NULL, disk, "mem", big);
  assert_non_null (e);
  off = 0;
  for (uint64_t i = 0; i < n; i++) {
    off += gap (i) * unit;
    assert_int_equal (engine_trim (e, off, len (i) * unit, false), 0);
    off += len (i) * unit;
  }
  clock_gettime (CLOCK_MONOTONIC, &t0);
  engine_stop (e, 0);
  save_s = seconds_since (&t0);
  engine_close (e);
  assert_int_equal (stat (path, &st), 0);

  clock_gettime (CLOCK_MONOTONIC, &t0);
  e = open_engine (NULL, disk, "mem", big);
  load_s = seconds_since (&t0);
  assert_non_null (e);
  {
    struct engine_stats s;

    engine_get_stats (e, &s);
    assert_int_equal (s.pending_extents, n);
  }
  engine_close (e);
  print_message ("state, %s: %" PRIu64 " extents in %lld bytes (%.2f bytes "
                 "an extent), saved in %.2f s, loaded in %.2f s\n", name, n,
                 (long long) st.st_size, (double) st.st_size / n, save_s, load_s);
  assert_true ((double) st.st_size / n < max_bytes_per_extent);
  assert_true (save_s < 10 && load_s < 10);
}

static uint64_t one (uint64_t i) { return 1; }
static uint64_t three (uint64_t i) { return 3; }
/* A fixed pseudo-random walk (splitmix64 of the index): gaps of 1-64
 * and lengths of 1-16 units.
 */
static uint64_t
mix (uint64_t i)
{
  uint64_t z = i + UINT64_C (0x9e3779b97f4a7c15);

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}
static uint64_t rand_gap (uint64_t i) { return 1 + mix (i) % 64; }
static uint64_t rand_len (uint64_t i) { return 1 + mix (i + 7777777) % 16; }

static void
test_million_regular (void **state)
{
  million ("1 unit every 4", 16, three, one, 1.0);
}

static void
test_million_irregular (void **state)
{
  million ("gaps of 1-64 units, lengths of 1-16", 16, rand_gap, rand_len, 4.0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown (name, setup, teardown)
    T (test_roundtrip),
    T (test_close_without_stop_saves),
    T (test_missing_is_normal),
    T (test_nothing_pending_writes_nothing),
    T (test_failed_save_told_once),
    T (test_corrupt_refused),
    T (test_truncated_refused),
    T (test_other_version_refused),
    T (test_other_backend_refused),
    T (test_read_only_leaves_it),
    T (test_load_keeps_bound),
    T (test_clean_roundtrip),
    T (test_clean_only_saved),
    T (test_clean_load_bound_and_off),
    T (test_clean_refused),
    T (test_version_1_loads),
    cmocka_unit_test (test_version_1_file_decodes),
    cmocka_unit_test (test_format_damage),
    T (test_million_regular),
    T (test_million_irregular),
#undef T
  };

  return cmocka_run_group_tests_name ("state", tests, NULL, NULL);
}
