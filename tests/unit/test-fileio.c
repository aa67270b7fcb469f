/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: fileio_replace (common/fileio.h), the one atomic file
 * replace behind the state file, the journal, thin's meta file, the RBD
 * holder record and the statsfile: the new content or the old, never a
 * mix, and nothing left behind when a step fails.
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

#include "fileio.h"
#include "scratch.h"

static char dir[256], path[300], tmp[310];

static int
setup (void **state)
{
  scratch_make (dir, sizeof dir, "fileio");
  snprintf (path, sizeof path, "%s/file", dir);
  snprintf (tmp, sizeof tmp, "%s.tmp", path);
  return 0;
}

static int
teardown (void **state)
{
  scratch_remove (dir);
  return 0;
}

static void
put (const char *text)
{
  struct fileio_buffer b = { .data = text, .len = strlen (text) };
  const char *step;

  assert_int_equal (fileio_replace (path, 0600, 0, fileio_write_buffer, &b,
                                    &step), 0);
  assert_null (step);
}

static char *
content (void)
{
  static char buf[256];
  int fd = open (path, O_RDONLY);
  ssize_t n;

  assert_true (fd >= 0);
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  assert_true (n >= 0);
  buf[n] = '\0';
  return buf;
}

static void
test_replaces_with_mode (void **state)
{
  struct stat st;

  put ("old content, longer than the new");
  put ("new");
  assert_string_equal (content (), "new");
  assert_int_equal (stat (path, &st), 0);
  assert_int_equal (st.st_mode & 0777, 0600);
  assert_int_equal (access (tmp, F_OK), -1);
}

static int
failing_fill (int fd, void *opaque)
{
  if (write (fd, "partial", 7) != 7)
    return -1;
  errno = ENOSPC;
  return -1;
}

/* A fill that fails: the old file whole, no temporary file, errno kept. */
static void
test_failed_fill_keeps_old (void **state)
{
  const char *step;

  put ("old");
  assert_int_equal (fileio_replace (path, 0600, 0, failing_fill, NULL, &step),
                    -1);
  assert_int_equal (errno, ENOSPC);
  assert_string_equal (step, "write");
  assert_string_equal (content (), "old");
  assert_int_equal (access (tmp, F_OK), -1);
}

/* The temporary name taken by a directory, or a link (never followed):
 * "create" fails and nothing of the caller's is touched.
 */
static void
test_create_refused (void **state)
{
  struct fileio_buffer b = { .data = "x", .len = 1 };
  char target[320];
  const char *step;

  put ("old");
  assert_int_equal (mkdir (tmp, 0700), 0);
  assert_int_equal (fileio_replace (path, 0600, 0, fileio_write_buffer, &b,
                                    &step), -1);
  assert_string_equal (step, "create");
  assert_int_equal (rmdir (tmp), 0);

  snprintf (target, sizeof target, "%s/target", dir);
  assert_int_equal (symlink (target, tmp), 0);
  assert_int_equal (fileio_replace (path, 0600, 0, fileio_write_buffer, &b,
                                    &step), -1);
  assert_int_equal (errno, ELOOP);
  assert_int_equal (access (target, F_OK), -1);
  assert_int_equal (unlink (tmp), 0);
  assert_string_equal (content (), "old");
}

/* A rename that fails (path is a directory with something in it): the
 * temporary file is removed and the directory left as it was.
 */
static void
test_failed_rename_cleans_up (void **state)
{
  struct fileio_buffer b = { .data = "x", .len = 1 };
  char inside[320];
  const char *step;
  int fd;

  assert_int_equal (mkdir (path, 0700), 0);
  snprintf (inside, sizeof inside, "%s/inside", path);
  fd = open (inside, O_WRONLY | O_CREAT, 0600);
  assert_true (fd >= 0);
  close (fd);
  assert_int_equal (fileio_replace (path, 0600, 0, fileio_write_buffer, &b,
                                    &step), -1);
  assert_string_equal (step, "rename");
  assert_int_equal (access (tmp, F_OK), -1);
  assert_int_equal (access (inside, F_OK), 0);
  assert_int_equal (unlink (inside), 0);
  assert_int_equal (rmdir (path), 0);
}

/* FILEIO_KEEP_FD: the descriptor is the new file's, open for writing. */
static void
test_keep_fd (void **state)
{
  struct fileio_buffer b = { .data = "abc", .len = 3 };
  const char *step;
  int fd;

  put ("old");
  fd = fileio_replace (path, 0600, FILEIO_KEEP_FD, fileio_write_buffer, &b,
                       &step);
  assert_true (fd >= 0);
  assert_int_equal (pwrite_all (fd, "def", 3, 3), 0);
  close (fd);
  assert_string_equal (content (), "abcdef");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_replaces_with_mode, setup, teardown),
    cmocka_unit_test_setup_teardown (test_failed_fill_keeps_old, setup,
                                     teardown),
    cmocka_unit_test_setup_teardown (test_create_refused, setup, teardown),
    cmocka_unit_test_setup_teardown (test_failed_rename_cleans_up, setup,
                                     teardown),
    cmocka_unit_test_setup_teardown (test_keep_fd, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
