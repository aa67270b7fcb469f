/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: the in-memory backend (see mem-backend.h). */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mem-backend.h"

static struct mem_backend *
to_mem (struct backend *b)
{
  return (struct mem_backend *) b;
}

static int
mem_pread (struct backend *b, void *buf, uint32_t count, uint64_t offset)
{
  struct mem_backend *m = to_mem (b);

  pthread_mutex_lock (&m->lock);
  memcpy (buf, m->data + offset, count);
  pthread_mutex_unlock (&m->lock);
  return 0;
}

static int
mem_pwrite (struct backend *b, const void *buf, uint32_t count,
            uint64_t offset, bool fua)
{
  struct mem_backend *m = to_mem (b);

  pthread_mutex_lock (&m->lock);
  memcpy (m->data + offset, buf, count);
  m->write_calls++;
  pthread_mutex_unlock (&m->lock);
  return 0;
}

static int
mem_zero (struct backend *b, uint64_t offset, uint64_t length, bool may_trim,
          bool fua)
{
  struct mem_backend *m = to_mem (b);

  pthread_mutex_lock (&m->lock);
  memset (m->data + offset, 0, length);
  m->zero_calls++;
  pthread_mutex_unlock (&m->lock);
  return 0;
}

static int
mem_discard (struct backend *b, uint64_t offset, uint64_t length, bool fua)
{
  struct mem_backend *m = to_mem (b);
  unsigned delay;

  if (m->on_discard)
    m->on_discard (m->on_discard_opaque);
  pthread_mutex_lock (&m->lock);
  if (m->fail_count > 0 && m->fail_skip > 0)
    m->fail_skip--;
  else if (m->fail_count > 0) {
    m->fail_count--;
    errno = m->fail_errno;
    pthread_mutex_unlock (&m->lock);
    return -1;
  }
  delay = m->discard_delay_ms;
  pthread_mutex_unlock (&m->lock);

  if (delay) {
    struct timespec ts = { delay / 1000, (delay % 1000) * 1000000L };
    nanosleep (&ts, NULL);
  }
  /* Zero at the end of the discard: a write that slipped in during the
   * discard would be wiped out here, which the tests detect.
   */
  pthread_mutex_lock (&m->lock);
  memset (m->data + offset, 0, length);
  if (m->ncalls < MEM_MAX_CALLS)
    m->calls[m->ncalls++] = (struct mem_discard) { offset, length, fua };
  pthread_mutex_unlock (&m->lock);
  return 0;
}

static int
mem_flush (struct backend *b)
{
  return 0;
}

static void
mem_close (struct backend *b)
{
  struct mem_backend *m = to_mem (b);

  pthread_mutex_destroy (&m->lock);
  free (m->data);
  free (m);
}

#define MEM_BLOCK 4096

static bool
block_is_zero (const unsigned char *p)
{
  for (unsigned i = 0; i < MEM_BLOCK; i++)
    if (p[i])
      return false;
  return true;
}

static int
mem_extents (struct backend *b, uint64_t offset, uint64_t length,
             backend_extent_fn fn, void *opaque)
{
  struct mem_backend *m = to_mem (b);
  uint64_t end = offset + length, pos = offset;

  while (pos < end) {
    uint64_t run = pos;
    bool zero;

    pthread_mutex_lock (&m->lock);
    zero = block_is_zero (m->data + pos / MEM_BLOCK * MEM_BLOCK);
    while (run < end &&
           block_is_zero (m->data + run / MEM_BLOCK * MEM_BLOCK) == zero)
      run = (run / MEM_BLOCK + 1) * MEM_BLOCK;
    pthread_mutex_unlock (&m->lock);
    run = run < end ? run : end;
    if (fn (pos, run - pos, zero ? BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO
            : 0, opaque) == -1)
      return -1;
    pos = run;
  }
  return 0;
}

static const struct backend_ops mem_ops = {
  .kind = "mem",
  .pread = mem_pread,
  .pwrite = mem_pwrite,
  .zero = mem_zero,
  .discard = mem_discard,
  .flush = mem_flush,
  .close = mem_close,
};

void
mem_backend_enable_extents (struct mem_backend *m)
{
  m->ops.extents = mem_extents;
  m->b.limits.can_extents = true;
}

struct mem_backend *
mem_backend_new (uint64_t size, uint32_t granularity, uint64_t max_discard)
{
  struct mem_backend *m = calloc (1, sizeof *m);

  if (m == NULL || (m->data = calloc (1, size)) == NULL)
    abort ();
  pthread_mutex_init (&m->lock, NULL);
  m->ops = mem_ops;
  m->b.ops = &m->ops;
  m->b.size = size;
  m->b.limits = (struct backend_limits) {
    .can_discard = true, .can_zero = true, .can_flush = true,
    .discard_zeroes = true, .zero_unmaps = true, .can_multi_conn = true,
    .discard_granularity = granularity, .max_discard = max_discard,
  };
  strcpy (m->b.identity.kind, "mem");
  strcpy (m->b.identity.name, "mem");
  return m;
}

unsigned
mem_backend_calls (struct mem_backend *m, struct mem_discard *out,
                   unsigned max)
{
  unsigned n;

  pthread_mutex_lock (&m->lock);
  n = m->ncalls < max ? m->ncalls : max;
  memcpy (out, m->calls, n * sizeof *out);
  pthread_mutex_unlock (&m->lock);
  return n;
}
