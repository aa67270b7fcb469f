/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the journal of the pending set (invariant 10) under a
 * simulated power loss.  An engine with state= and the journal runs
 * random trims, writes, zeroes and drains, a FLUSH after each, and the
 * pending set is recorded at each FLUSH with the journal's length then.
 * The journal is then cut at every record boundary and inside records
 * (torn appends), and corrupted after a FLUSH's records: each start
 * succeeds and replays exactly the pending set of the last FLUSH whose
 * records are whole.  The format's replay is also cut at every byte.
 * Where the backend's flush covers the journal, a FLUSH that writes the
 * records out while the journal's thread is woken to commit a full
 * buffer leaves one commit at a time, and a journal that replays whole.
 */
#include <config.h>

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
#include "engine-test.h"
#include "engine-util.h"
#include "journal.h"
#include "mem-backend.h"
#include "scratch.h"

#define DISK (4 * MiB)
#define GRAN 4096
#define STEPS 40

static uint64_t disk = DISK;     /* the backend's size */
static char dir[64];
static char path[128];
static char jpath[160];

static int
setup (void **state)
{
  scratch_make (dir, sizeof dir, "dc-journal");
  snprintf (path, sizeof path, "%s/state", dir);
  snprintf (jpath, sizeof jpath, "%s/state.journal", dir);
  disk = DISK;
  return 0;
}

static int
teardown (void **state)
{
  scratch_remove (dir);
  return 0;
}

/* An engine on a fresh in-memory disk; it reports no extents, so a start
 * after a crash keeps no known-clean claim and the pending set alone is
 * compared.
 */
static struct engine *
open_journaled (struct mem_backend *mem)
{
  const char *const defaults[] = { "delay", "1h", "state", path, NULL };

  return try_open_engine_on (mem, defaults, NULL);
}

static struct engine *
open_engine (void)
{
  return open_journaled (mem_backend_new (disk, GRAN, 64 * MiB));
}

/* The pending set as a string of "offset+length " items. */
static char *
pending (struct engine *e)
{
  size_t cap = 1 << 16, len = 0;
  char *s = calloc (1, cap);
  struct extent batch[16];
  uint64_t from = 0;
  uint32_t now;
  size_t n;

  assert_non_null (s);
  while ((n = engine_dump_batch (e, from, batch, 16, &now)) > 0) {
    for (size_t i = 0; i < n; i++) {
      assert_true (len + 64 < cap);
      len += snprintf (s + len, cap - len, "%llu+%llu ",
                       (unsigned long long) batch[i].offset,
                       (unsigned long long) batch[i].length);
    }
    from = batch[n - 1].offset + batch[n - 1].length;
  }
  return s;
}

static unsigned char *
read_all (const char *p, size_t *len)
{
  struct stat st;
  unsigned char *buf;
  int fd = open (p, O_RDONLY);

  assert_true (fd >= 0);
  assert_int_equal (fstat (fd, &st), 0);
  *len = st.st_size;
  buf = malloc (*len + 1);
  assert_non_null (buf);
  assert_int_equal (pread (fd, buf, *len, 0), (ssize_t) *len);
  close (fd);
  return buf;
}

static void
write_all (const char *p, const void *buf, size_t len)
{
  int fd = open (p, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  assert_true (fd >= 0);
  assert_int_equal (write (fd, buf, len), (ssize_t) len);
  close (fd);
}

/* Where the records end: the journal is preallocated with zeros. */
static size_t
records_end (const unsigned char *j, size_t len)
{
  static const unsigned char zero[JOURNAL_RECORD_SIZE];
  size_t off = JOURNAL_HEADER_SIZE;

  while (off + JOURNAL_RECORD_SIZE <= len &&
         memcmp (j + off, zero, JOURNAL_RECORD_SIZE) != 0)
    off += JOURNAL_RECORD_SIZE;
  return off;
}

/* Restart from the saved checkpoint and the journal cut at cut bytes,
 * with byte flip (if not SIZE_MAX) corrupted: the pending set replayed.
 */
static char *
restart (const unsigned char *state, size_t slen, const unsigned char *j,
         size_t cut, size_t flip)
{
  unsigned char *copy = malloc (cut + 1);
  struct engine *e;
  char *s;

  assert_non_null (copy);
  memcpy (copy, j, cut);
  if (flip < cut)
    copy[flip] ^= 0x40;
  write_all (path, state, slen);
  write_all (jpath, copy, cut);
  free (copy);
  e = open_engine ();
  assert_non_null (e);            /* never refuses to start */
  s = pending (e);
  engine_close (e);
  return s;
}

static void
test_power_loss (void **unused)
{
  struct engine *e = open_engine ();
  char *want[STEPS + 1];
  size_t ends[STEPS + 1], slen, jlen;
  unsigned char *state, *j;
  unsigned seed = 24;

  assert_non_null (e);
  want[0] = pending (e);
  for (int i = 1; i <= STEPS; i++) {
    uint64_t off = (uint64_t) (rand_r (&seed) % (DISK / GRAN - 16)) * GRAN;
    uint64_t len = (uint64_t) (1 + rand_r (&seed) % 16) * GRAN;
    unsigned char buf[GRAN] = { (unsigned char) i };
    int op = rand_r (&seed) % 10;

    if (op < 5)
      assert_int_equal (engine_trim (e, off, len, false), 0);
    else if (op < 8)
      assert_int_equal (engine_pwrite (e, buf, GRAN, off + GRAN / 2 * (op & 1),
                                       false), 0);
    else if (op < 9)
      assert_int_equal (engine_zero (e, off, len, true, false, false), 0);
    else
      assert_int_equal (engine_drain (e, NULL, NULL), 0);
    assert_int_equal (engine_flush (e), 0);
    want[i] = pending (e);
    j = read_all (jpath, &jlen);
    ends[i] = records_end (j, jlen);
    free (j);
  }
  ends[0] = JOURNAL_HEADER_SIZE;
  /* The images a power loss leaves: the checkpoint of the start and the
   * journal as the last FLUSH made it durable.
   */
  state = read_all (path, &slen);
  j = read_all (jpath, &jlen);
  engine_close (e);

  for (int i = 0; i <= STEPS; i++) {
    size_t next = i < STEPS ? ends[i + 1] : ends[i];
    size_t cuts[] = { ends[i], ends[i] + 1, ends[i] + JOURNAL_RECORD_SIZE / 2,
                      ends[i] + JOURNAL_RECORD_SIZE - 1 };

    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
      char *got;

      if (cuts[c] > ends[i] && cuts[c] >= next)
        continue;               /* not a cut inside the next FLUSH's records */
      got = restart (state, slen, j, cuts[c], SIZE_MAX);
      if (strcmp (got, want[i]) != 0)
        fail_msg ("journal cut at %zu (after FLUSH %d): replayed %s, "
                  "expected %s", cuts[c], i, got, want[i]);
      free (got);
    }
    /* A torn record after this FLUSH's: the rest is never applied. */
    if (i < STEPS && next > ends[i]) {
      char *got = restart (state, slen, j, jlen, ends[i] + 20);

      if (strcmp (got, want[i]) != 0)
        fail_msg ("journal torn after FLUSH %d: replayed %s, expected %s",
                  i, got, want[i]);
      free (got);
    }
  }
  /* A torn header: the journal is not replayed, the checkpoint is. */
  for (size_t cut = 0; cut < JOURNAL_HEADER_SIZE; cut += 7) {
    char *got = restart (state, slen, j, cut, SIZE_MAX);

    assert_string_equal (got, want[0]);
    free (got);
  }
  free (state);
  free (j);
  for (int i = 0; i <= STEPS; i++)
    free (want[i]);
}

static bool
flush_covers_journal (struct backend *b, int fd)
{
  return true;
}

/* A FLUSH writing the records out while appends fill the buffer (1,024
 * records) and wake the journal's thread: the thread must wait for the
 * write-out rather than commit beside it, at the same place in the file
 * (which lost every record from there on).  The hook appends during the
 * write-out and gives the thread time to act.  It appends with TRIMs of
 * fresh ranges: a write that cancels writes its records through first,
 * and would wait for this very write-out (the hook runs on its thread).
 */
struct kick {
  struct engine *e;
  bool done;
  int failed;
};

static void
append_during_write_out (void *opaque, bool sync)
{
  struct kick *k = opaque;
  if (sync || k->done)
    return;
  k->done = true;
  for (int i = 0; i < 1100; i++)
    k->failed |= engine_trim (k->e, (uint64_t) (100 + 2 * i) * GRAN, GRAN,
                              false) == -1;
  usleep (100 * 1000);
}

static void
test_kick_during_write_out (void **unused)
{
  unsigned char buf[GRAN] = { 1 };
  struct mem_backend *mem;
  struct kick k = { 0 };
  unsigned char *state, *j;
  size_t slen, jlen;
  char *want, *got;

  disk = 4 * DISK;                /* room for the hook's trims */
  mem = mem_backend_new (disk, GRAN, 64 * MiB);
  mem->ops.flush_covers = flush_covers_journal;
  k.e = open_journaled (mem);
  assert_non_null (k.e);
  engine_test_set_journal_hook (k.e, append_during_write_out, &k);
  assert_int_equal (engine_start (k.e), 0);
  assert_int_equal (engine_trim (k.e, 0, 100 * GRAN, false), 0);
  for (int i = 0; i < 10; i++)
    assert_int_equal (engine_pwrite (k.e, buf, GRAN, (uint64_t) i * GRAN,
                                     false), 0);
  assert_int_equal (engine_flush (k.e), 0);
  assert_true (k.done);
  assert_int_equal (k.failed, 0);
  assert_int_equal (engine_flush (k.e), 0);
  want = pending (k.e);
  state = read_all (path, &slen);
  j = read_all (jpath, &jlen);
  engine_close (k.e);
  got = restart (state, slen, j, jlen, SIZE_MAX);
  assert_string_equal (got, want);
  free (got);
  free (want);
  free (state);
  free (j);
}

static int
count_record (const struct journal_record *r, void *opaque)
{
  (*(uint64_t *) opaque)++;
  return 0;
}

/* The format alone: a journal of n records cut at every byte replays
 * exactly the whole records before the cut.
 */
static void
test_replay_every_byte (void **unused)
{
  struct journal_header h = { .first_seq = 7, .granularity = GRAN };
  enum { N = 12 };
  unsigned char img[JOURNAL_HEADER_SIZE + N * JOURNAL_RECORD_SIZE];
  struct journal_header got;
  char why[128];

  journal_header_encode (&h, img);
  for (int i = 0; i < N; i++) {
    struct journal_record r = {
      .map = i % 2 ? JOURNAL_CLEAN : JOURNAL_PENDING,
      .op = EXTMAP_OBSERVE_INSERT + i % 3, .seq = 7 + i,
      .offset = i % 3 == 2 ? 0 : i * GRAN, .length = i % 3 == 2 ? 0 : GRAN,
    };

    journal_record_encode (&r, img + JOURNAL_HEADER_SIZE + i * JOURNAL_RECORD_SIZE);
  }
  assert_int_equal (journal_header_decode (img, sizeof img, &got, why,
                                           sizeof why), 0);
  assert_int_equal (got.first_seq, 7);
  for (size_t cut = JOURNAL_HEADER_SIZE; cut <= sizeof img; cut++) {
    uint64_t n = 0, records;
    size_t valid;

    assert_int_equal (journal_replay (img, cut, &got, count_record, &n,
                                      &records, &valid), 0);
    assert_int_equal (n, (cut - JOURNAL_HEADER_SIZE) / JOURNAL_RECORD_SIZE);
    assert_int_equal (records, n);
    assert_int_equal (valid, JOURNAL_HEADER_SIZE + n * JOURNAL_RECORD_SIZE);
  }
  /* Out of sequence ends it too. */
  got.first_seq = 8;
  {
    uint64_t n = 0;

    journal_replay (img, sizeof img, &got, count_record, &n, NULL, NULL);
    assert_int_equal (n, 0);
  }
}

/* The header's prefix (common/file-header.c): another file, or a
 * version this build does not read, is refused before its checksum is
 * looked at, with the one message every format gives.
 */
static void
test_header_refused (void **unused)
{
  struct journal_header h = { .first_seq = 1, .granularity = GRAN };
  unsigned char img[JOURNAL_HEADER_SIZE];
  struct journal_header got;
  char why[128];

  journal_header_encode (&h, img);
  img[8] = JOURNAL_VERSION + 1;
  assert_int_equal (journal_header_decode (img, sizeof img, &got, why,
                                           sizeof why), -1);
  assert_string_equal (why, "format version 2, this discardcache reads "
                       "version 1");
  img[8] = JOURNAL_VERSION;
  img[0] = 'X';
  assert_int_equal (journal_header_decode (img, sizeof img, &got, why,
                                           sizeof why), -1);
  assert_string_equal (why, "not a discardcache journal");
  img[0] = 'D';
  assert_int_equal (journal_header_decode (img, sizeof img - 1, &got, why,
                                           sizeof why), -1);
  assert_string_equal (why, "its header is truncated");
  assert_int_equal (journal_header_decode (img, sizeof img, &got, why,
                                           sizeof why), 0);
}

/* A record whose range passes the end of the store was not written for
 * it: it ends the journal, as a torn one does, and what followed it is
 * not replayed either (nothing read from a file reaches the forward
 * path's contracts, common/verify.h).
 */
static void
test_replay_past_the_end (void **unused)
{
  const struct journal_header h = {
    .first_seq = 1, .granularity = GRAN, .backend_size = DISK,
  };
  const struct journal_record recs[] = {
    { JOURNAL_PENDING, EXTMAP_OBSERVE_INSERT, 1, 0, GRAN },
    { JOURNAL_PENDING, EXTMAP_OBSERVE_INSERT, 2, DISK - GRAN, 2 * GRAN },
    { JOURNAL_PENDING, EXTMAP_OBSERVE_INSERT, 3, 4 * GRAN, GRAN },
  };
  unsigned char img[JOURNAL_HEADER_SIZE + 3 * JOURNAL_RECORD_SIZE];
  struct engine *e;
  char *s;

  journal_header_encode (&h, img);
  for (int i = 0; i < 3; i++)
    journal_record_encode (&recs[i], img + JOURNAL_HEADER_SIZE +
                                     i * JOURNAL_RECORD_SIZE);
  write_all (jpath, img, sizeof img);
  e = open_engine ();
  assert_non_null (e);
  s = pending (e);
  assert_string_equal (s, "0+4096 ");
  free (s);
  engine_close (e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_replay_every_byte),
    cmocka_unit_test (test_header_refused),
    cmocka_unit_test_setup_teardown (test_replay_past_the_end, setup,
                                     teardown),
    cmocka_unit_test_setup_teardown (test_power_loss, setup, teardown),
    cmocka_unit_test_setup_teardown (test_kick_during_write_out, setup,
                                     teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
