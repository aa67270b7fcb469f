/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: backend_open and the regular file backend, on
 * sparse temporary files in $TMPDIR (else /tmp) and /dev/shm (tmpfs,
 * which has no FALLOC_FL_ZERO_RANGE).
 */
#include <config.h>

#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend.h"
#include "internal.h"
#include "test-backend-util.h"

#define MiB (1024 * 1024)
#define FILE_SIZE (16 * MiB)

/* A sparse file of FILE_SIZE bytes in dir; returns its malloc'd path. */
static char *
make_file (const char *dir)
{
  char *path;
  int fd;

  assert_true (asprintf (&path, "%s/test-backend-file.XXXXXX", dir) > 0);
  fd = mkstemp (path);
  assert_true (fd >= 0);
  assert_int_equal (ftruncate (fd, FILE_SIZE), 0);
  close (fd);
  return path;
}

static const char *
tmpdir (void)
{
  const char *d = getenv ("TMPDIR");

  return d && *d ? d : "/tmp";
}

struct fixture {
  char *path;
  struct backend *b;
};

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof *f);

  f->path = make_file (tmpdir ());
  f->b = backend_open (f->path, false);
  if (f->b == NULL)
    return -1;
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;

  backend_close (f->b);
  unlink (f->path);
  free (f->path);
  free (f);
  return 0;
}

static blkcnt_t
blocks_of (const char *path)
{
  struct stat st;

  assert_int_equal (stat (path, &st), 0);
  return st.st_blocks;
}

static void
test_spec_is_uri (void **state)
{
  assert_true (backend_spec_is_uri ("nbd://localhost"));
  assert_true (backend_spec_is_uri ("nbds://host:10809/export"));
  assert_true (backend_spec_is_uri ("nbd+unix:///?socket=/tmp/s"));
  assert_true (backend_spec_is_uri ("nbds+unix:///x?socket=/s"));
  assert_true (backend_spec_is_uri ("nbd+vsock:///"));
  assert_true (backend_spec_is_uri ("nbds+vsock:///"));
  assert_false (backend_spec_is_uri ("/dev/sda"));
  assert_false (backend_spec_is_uri ("nbd"));
  assert_false (backend_spec_is_uri ("./nbd:file"));
  assert_false (backend_spec_is_uri ("disk.img"));
  assert_false (backend_spec_is_uri (""));
  assert_false (backend_spec_is_uri ("http://host/disk"));
}

static void
test_open_errors (void **state)
{
  char dir[] = "/tmp/test-backend-dir.XXXXXX";
  char *fifo;

  errno = 0;
  assert_null (backend_open ("/nonexistent/disk.img", false));
  assert_int_equal (errno, ENOENT);
  assert_null (backend_open ("", false));
  assert_int_equal (errno, EINVAL);

  assert_non_null (mkdtemp (dir));
  assert_null (backend_open (dir, false));
  assert_int_equal (errno, EISDIR);
  assert_null (backend_open (dir, true));
  assert_int_equal (errno, EISDIR);

  /* A fifo must be refused, not hang the open (no writer). */
  assert_true (asprintf (&fifo, "%s/fifo", dir) > 0);
  assert_int_equal (mkfifo (fifo, 0600), 0);
  assert_null (backend_open (fifo, true));
  assert_int_equal (errno, EINVAL);
  assert_null (backend_open (fifo, false));
  assert_int_equal (errno, EINVAL);

  /* A character device. */
  assert_null (backend_open ("/dev/null", false));
  assert_int_equal (errno, EINVAL);

  unlink (fifo);
  free (fifo);
  rmdir (dir);
}

/* Opening a file we may only read, for writing, fails with EACCES (as
 * root, in a child that became nobody, since root may write anything).
 */
static void
test_open_no_write_permission (void **state)
{
  char dir[] = "/tmp/test-backend-perm.XXXXXX";
  char *path;
  pid_t pid;
  int status;

  assert_non_null (mkdtemp (dir));
  assert_int_equal (chmod (dir, 0755), 0);
  path = make_file (dir);
  assert_int_equal (chmod (path, 0444), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    struct backend *b;

    if (geteuid () == 0 && (setgid (65534) == -1 || setuid (65534) == -1))
      _exit (2);
    b = backend_open (path, false);
    if (b != NULL || errno != EACCES)
      _exit (1);
    b = backend_open (path, true);     /* read-only works */
    _exit (b != NULL && b->limits.read_only ? 0 : 3);
  }
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
  unlink (path);
  free (path);
  rmdir (dir);
}

static void
test_identity_and_limits (void **state)
{
  struct fixture *f = *state;
  struct backend *b = f->b;
  struct stat st;
  struct statfs sfs;
  char real[PATH_MAX];

  assert_int_equal (stat (f->path, &st), 0);
  assert_int_equal (statfs (f->path, &sfs), 0);
  assert_non_null (realpath (f->path, real));
  assert_int_equal (b->size, FILE_SIZE);
  assert_string_equal (b->identity.kind, "file");
  assert_string_equal (b->identity.name, real);
  assert_true (b->identity.dev == st.st_dev);
  assert_true (b->identity.ino == st.st_ino);
  check_limits_sane (b);
  assert_false (b->limits.read_only);
  assert_true (b->limits.can_discard);
  assert_true (b->limits.can_zero);
  assert_true (b->limits.can_fua);
  assert_true (b->limits.can_flush);
  assert_true (b->limits.can_extents);
  assert_true (b->limits.discard_zeroes);
  assert_true (b->limits.zero_unmaps);
  assert_true (b->limits.can_multi_conn);
  assert_int_equal (b->limits.discard_granularity, sfs.f_bsize);
  assert_int_equal (b->limits.max_discard, 1024 * MiB);
}

static void
test_read_write (void **state)
{
  struct fixture *f = *state;
  struct backend *b = f->b;

  write_pattern (b, 0, 4096, false);
  write_pattern (b, 5000, 3 * MiB + 17, true);   /* unaligned, FUA */
  write_pattern (b, FILE_SIZE - 100, 100, false); /* up to the end */
  assert_pattern (b, 0, 4096);
  assert_pattern (b, 5000, 3 * MiB + 17);
  assert_pattern (b, FILE_SIZE - 100, 100);
  assert_zeroes (b, 4096, 5000 - 4096);
  assert_int_equal (backend_flush (b), 0);
}

static void
test_discard_punches_hole (void **state)
{
  struct fixture *f = *state;
  struct backend *b = f->b;
  blkcnt_t before, after;

  write_pattern (b, 0, 4 * MiB, false);
  assert_int_equal (backend_flush (b), 0);
  before = blocks_of (f->path);
  assert_true (before >= 4 * MiB / 512);
  assert_int_equal (backend_discard (b, MiB, 2 * MiB, true), 0);
  after = blocks_of (f->path);
  assert_true (after <= before - 2 * MiB / 512);
  assert_pattern (b, 0, MiB);
  assert_zeroes (b, MiB, 2 * MiB);
  assert_pattern (b, 3 * MiB, MiB);
  /* Empty discards are no-ops, even at the end. */
  assert_int_equal (backend_discard (b, FILE_SIZE, 0, false), 0);
}

static void
test_zero (void **state)
{
  struct fixture *f = *state;
  struct backend *b = f->b;
  blkcnt_t before;

  write_pattern (b, 0, 4 * MiB, false);
  assert_int_equal (backend_flush (b), 0);
  before = blocks_of (f->path);
  /* Without may_trim the blocks stay allocated. */
  assert_int_equal (backend_zero (b, 100, MiB, false, false), 0);
  assert_pattern (b, 0, 100);
  assert_zeroes (b, 100, MiB);
  assert_pattern (b, MiB + 100, MiB);
  assert_true (blocks_of (f->path) >= before);
  /* With may_trim they may be freed (a hole punch here). */
  assert_int_equal (backend_zero (b, 2 * MiB, 2 * MiB, true, true), 0);
  assert_zeroes (b, 2 * MiB, 2 * MiB);
  assert_true (blocks_of (f->path) <= before - 2 * MiB / 512);
}

struct extent { uint64_t offset, length; uint32_t type; };
struct extents { struct extent e[16]; int n; };

static int
collect (uint64_t offset, uint64_t length, uint32_t type, void *opaque)
{
  struct extents *x = opaque;

  if (x->n == 16)
    return -1;
  x->e[x->n++] = (struct extent) { offset, length, type };
  return 0;
}

static void
assert_extent (const struct extent *e, uint64_t offset, uint64_t length,
               uint32_t type)
{
  assert_int_equal (e->offset, offset);
  assert_int_equal (e->length, length);
  assert_int_equal (e->type, type);
}

static void
test_extents (void **state)
{
  struct fixture *f = *state;
  struct backend *b = f->b;
  const uint32_t hole = BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO;
  struct extents x = { .n = 0 };

  write_pattern (b, MiB, MiB, false);
  assert_int_equal (backend_flush (b), 0);
  assert_int_equal (backend_extents (b, 0, 4 * MiB, collect, &x), 0);
  assert_int_equal (x.n, 3);
  assert_extent (&x.e[0], 0, MiB, hole);
  assert_extent (&x.e[1], MiB, MiB, 0);
  assert_extent (&x.e[2], 2 * MiB, 2 * MiB, hole);

  /* A range that starts inside data and ends inside the hole. */
  x.n = 0;
  assert_int_equal (backend_extents (b, MiB + 4096, MiB, collect, &x), 0);
  assert_int_equal (x.n, 2);
  assert_extent (&x.e[0], MiB + 4096, MiB - 4096, 0);
  assert_extent (&x.e[1], 2 * MiB, 4096, hole);

  /* After a discard the data run is a hole again. */
  assert_int_equal (backend_discard (b, MiB, MiB, false), 0);
  x.n = 0;
  assert_int_equal (backend_extents (b, 0, FILE_SIZE, collect, &x), 0);
  assert_int_equal (x.n, 1);
  assert_extent (&x.e[0], 0, FILE_SIZE, hole);

  assert_fails_with (backend_extents (b, FILE_SIZE - 1, 2, collect, &x),
                     EINVAL);
}

static void
test_range_errors (void **state)
{
  struct fixture *f = *state;

  check_range_errors (f->b);
}

static void
test_read_only (void **state)
{
  char *path = make_file (tmpdir ());
  struct backend *b = backend_open (path, true);

  assert_non_null (b);
  check_limits_sane (b);
  check_read_only (b);
  assert_int_equal (backend_flush (b), 0);
  backend_close (b);
  unlink (path);
  free (path);
}

/* tmpfs has PUNCH_HOLE but not ZERO_RANGE: zero without may_trim takes
 * the punch-and-allocate path.
 */
static void
test_zero_on_tmpfs (void **state)
{
  struct statfs sfs;
  struct backend *b;
  char *path;

  if (statfs ("/dev/shm", &sfs) == -1 || sfs.f_type != 0x01021994 /* TMPFS */)
    skip ();
  path = make_file ("/dev/shm");
  b = backend_open (path, false);
  assert_non_null (b);
  write_pattern (b, 0, 2 * MiB, false);
  assert_int_equal (backend_zero (b, 4096, MiB, false, true), 0);
  assert_int_equal (backend_zero (b, MiB + 8192, 1000, false, false), 0);
  assert_pattern (b, 0, 4096);
  assert_zeroes (b, 4096, MiB);
  assert_pattern (b, MiB + 4096, 4096);
  assert_zeroes (b, MiB + 8192, 1000);
  assert_pattern (b, MiB + 9192, MiB - 9192);
  assert_true (blocks_of (path) >= 2 * MiB / 512);  /* still allocated */
  backend_close (b);
  unlink (path);
  free (path);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_spec_is_uri),
    cmocka_unit_test (test_open_errors),
    cmocka_unit_test (test_open_no_write_permission),
    cmocka_unit_test_setup_teardown (test_identity_and_limits, setup, teardown),
    cmocka_unit_test_setup_teardown (test_read_write, setup, teardown),
    cmocka_unit_test_setup_teardown (test_discard_punches_hole, setup, teardown),
    cmocka_unit_test_setup_teardown (test_zero, setup, teardown),
    cmocka_unit_test_setup_teardown (test_extents, setup, teardown),
    cmocka_unit_test_setup_teardown (test_range_errors, setup, teardown),
    cmocka_unit_test (test_read_only),
    cmocka_unit_test (test_zero_on_tmpfs),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
