/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what the thin-mode unit tests share (thin-util.h): a
 * scratch directory for meta=, a thin volume over an engine over an
 * in-memory backend, and helpers to write, read and crash it.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "mem-backend.h"
#include "scratch.h"
#include "thin-util.h"
#include "volume.h"

static char dir[256];
char meta[300];
struct mem_backend *mem;
struct volume *vol;
struct engine *eng;
const char *reserve_key;

int
thin_setup (void **state)
{
  scratch_make (dir, sizeof dir, "test-thin");
  snprintf (meta, sizeof meta, "%s/meta", dir);
  reserve_key = "0";
  return 0;
}

/* The thin volume, then the engine below it. */
void
close_thin (void)
{
  volume_close (vol);
  vol = NULL;
  engine_close (eng);
  eng = NULL;
}

int
thin_teardown (void **state)
{
  close_thin ();
  scratch_remove (dir);
  return 0;
}

/* A thin volume over an engine over backend m (a new one if NULL),
 * with a delay that keeps discards pending.  Sets eng; NULL (and eng
 * NULL) when the volume is refused.
 */
struct volume *
open_thin_on (struct mem_backend *m, const char *slot, const char *size)
{
  struct engine_config ecfg;
  struct volume_config vcfg;
  struct volume *v;

  engine_config_init (&ecfg);
  ecfg.delay_ms = 3600 * 1000;
  volume_config_init (&vcfg);
  assert_int_equal (volume_config_set (&vcfg, "thin", "on"), 0);
  assert_int_equal (volume_config_set (&vcfg, "slot", slot), 0);
  assert_int_equal (volume_config_set (&vcfg, "size", size), 0);
  assert_int_equal (volume_config_set (&vcfg, "meta", meta), 0);
  if (reserve_key)
    assert_int_equal (volume_config_set (&vcfg, "reserve", reserve_key), 0);
  mem = m ? m : mem_backend_new (DISK, 4 * KiB, 1 << 30);
  eng = engine_open (&ecfg, &mem->b);
  assert_non_null (eng);
  v = volume_open (eng, &vcfg);
  if (v == NULL) {
    engine_close (eng);
    eng = NULL;
  }
  engine_config_free (&ecfg);
  volume_config_free (&vcfg);
  return v;
}

/* Exported size twice the backend's. */
void
open_thin (void)
{
  vol = open_thin_on (NULL, "64k", "2M");
  assert_non_null (vol);
}

/* A backend full of non-zero bytes, as a used disk. */
struct mem_backend *
used_backend (uint64_t size)
{
  struct mem_backend *m = mem_backend_new (size, 4 * KiB, 1 << 30);

  memset (m->data, 0xee, size);
  return m;
}

struct volume_stats
stats (void)
{
  struct volume_stats st;

  volume_get_stats (vol, &st);
  return st;
}

void
fill (uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[64 * SLOT];

  memset (buf, byte, length);
  assert_int_equal (volume_pwrite (vol, buf, length, offset, false), 0);
}

void
assert_filled (uint64_t offset, uint32_t length, int byte)
{
  static unsigned char buf[64 * SLOT];

  assert_int_equal (volume_pread (vol, buf, length, offset), 0);
  for (uint32_t i = 0; i < length; i++)
    if (buf[i] != byte)
      fail_msg ("byte %u at offset %llu: %#x, expected %#x", i,
                (unsigned long long) offset + i, buf[i], byte);
}

/* The physical slot logical slot l maps to, or -1. */
int64_t
phys_of (uint64_t l)
{
  struct volume_map_run run;

  if (volume_dump_map_batch (vol, l, &run, 1) <= 0 || run.logical != l)
    return -1;
  return run.physical;
}

unsigned char *
read_file (const char *path, size_t *len)
{
  struct stat st;
  unsigned char *p;
  int fd = open (path, O_RDONLY);

  if (fd < 0)
    fail_msg ("%s: %s", path, strerror (errno));
  assert_int_equal (fstat (fd, &st), 0);
  p = malloc (st.st_size + 1);
  assert_non_null (p);
  assert_int_equal (read (fd, p, st.st_size), st.st_size);
  close (fd);
  *len = st.st_size;
  return p;
}

void
write_file (const char *path, const void *p, size_t len)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  assert_true (fd >= 0);
  assert_int_equal (write (fd, p, len), (ssize_t) len);
  close (fd);
}

/* What a kill -9 leaves: close this volume, put back meta image img
 * (freed) and start again on copy, the backend as it was then.
 */
void
reopen_after_crash (struct mem_backend *copy, unsigned char *img, size_t len)
{
  close_thin ();
  write_file (meta, img, len);
  free (img);
  vol = open_thin_on (copy, "64k", "2M");
  assert_non_null (vol);
}

void
restart (void)
{
  struct mem_backend *m = mem_backend_new (DISK, 4 * KiB, 1 << 30);

  memcpy (m->data, mem->data, DISK);
  close_thin ();
  vol = open_thin_on (m, "64k", "2M");
  assert_non_null (vol);
}
