/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the control socket against the in-memory backend: the
 * engine's side (a control-socket flush forwards everything forwardable
 * ignoring delay, minlen and pause, reports progress and errors, and
 * ends at a stop), and the service's (the socket's lifecycle: created
 * at open, served from start; explicit path, default path renamed after
 * a fork, stale and live sockets, other files; its mode).
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "engine-util.h"
#include "mem-backend.h"
#include "scratch.h"
#include "service.h"

#define DISK (4 * MiB)

static char dir[64];
static char sock[100];

static int
setup (void **state)
{
  scratch_make (dir, sizeof dir, "dc-ctl");
  snprintf (sock, sizeof sock, "%s/ctl.sock", dir);
  return 0;
}

static int
teardown (void **state)
{
  scratch_remove (dir);
  return 0;
}

static struct engine *
open_engine (struct mem_backend **memp, const char *const *keys)
{
  static const char *const defaults[] = { "idle", "0", NULL };
  struct mem_backend *mem = mem_backend_new (DISK, 4 * KiB, 64 * MiB);

  if (memp)
    *memp = mem;
  return open_engine_on (mem, defaults, keys);
}

/* A service over a new in-memory backend, with the keys given; NULL if
 * it does not open.
 */
static struct service *
try_open_service (const char *const *keys)
{
  struct service_config cfg;
  struct mem_backend *mem = mem_backend_new (DISK, 4 * KiB, 64 * MiB);
  struct service *s;

  service_config_init (&cfg);
  for (; keys && *keys; keys += 2)
    assert_int_equal (service_config_set (&cfg, keys[0], keys[1]), 0);
  s = service_open_backend (&cfg, &mem->b);
  service_config_free (&cfg);
  return s;
}

static struct service *
open_service (const char *const *keys)
{
  struct service *s = try_open_service (keys);

  assert_non_null (s);
  return s;
}

/* Wait for flush f, at most 10 s. */
static int
wait_flush (struct engine *e, const struct engine_flush *f,
            struct engine_flush_progress *p)
{
  int r;

  for (int i = 0; i < 100; i++)
    if ((r = engine_flush_wait (e, f, 100, p)) != 0)
      return r;
  return 0;
}

static void
test_flush_ignores_delay_minlen_pause (void **state)
{
  static const char *const keys[] = {
    "delay", "1h", "minlen", "1M", NULL,
  };
  struct mem_backend *mem;
  struct engine *e = open_engine (&mem, keys);
  struct engine_flush f;
  struct engine_flush_progress p;
  struct mem_discard c[16];

  engine_pause (e, true);
  assert_int_equal (engine_start (e), 0);
  for (int i = 0; i < 8; i++)
    assert_int_equal (engine_trim (e, i * 64 * KiB, 16 * KiB, false), 0);
  /* A sub-granule fragment stays: nothing aligned to send. */
  assert_int_equal (engine_trim (e, 2 * MiB + 512, 1024, false), 0);
  engine_flush_begin (e, &f);
  assert_int_equal (f.total_bytes, 8 * 16 * KiB);
  assert_int_equal (wait_flush (e, &f, &p), 1);
  assert_int_equal (p.forwarded, 8);
  assert_int_equal (p.forwarded_bytes, 8 * 16 * KiB);
  assert_int_equal (mem_backend_calls (mem, c, 16), 8);
  assert_int_equal (stats (e).pending_bytes, 1024);
  assert_int_equal (stats (e).subgranule_bytes, 1024);
  /* Still paused for the flusher's own forwarding. */
  assert_true (stats (e).paused);
  engine_close (e);
}

/* The totals come from the map's running counters: 1,024 extents that
 * cannot merge, in three kinds, each counted exactly once.
 */
static void
test_totals (void **state)
{
  static const char *const keys[] = { "delay", "1h", NULL };
  struct engine *e = open_engine (NULL, keys);
  struct engine_flush f;
  uint64_t whole = 0, fragments = 0;

  for (uint64_t b = 0; b < DISK / (4 * KiB); b++) {
    uint64_t at = b * 4 * KiB;

    switch (b % 3) {
    case 0:                     /* a whole granule */
      assert_int_equal (engine_trim (e, at, 4 * KiB, false), 0);
      whole += 4 * KiB;
      break;
    case 1:                     /* apart from the granule before it */
      assert_int_equal (engine_trim (e, at + KiB, KiB, false), 0);
      fragments += KiB;
      break;
    default:
      assert_int_equal (engine_trim (e, at + 2 * KiB, 512, false), 0);
      fragments += 512;
    }
  }
  assert_int_equal (stats (e).pending_extents, DISK / (4 * KiB));
  assert_int_equal (stats (e).pending_bytes, whole + fragments);
  assert_int_equal (stats (e).subgranule_bytes, fragments);
  engine_flush_begin (e, &f);
  assert_int_equal (f.total_bytes, whole);
  /* A write over a fragment and a granule: both totals follow. */
  assert_int_equal (engine_pwrite (e, (char[8 * KiB]) { 0 }, 8 * KiB, 0,
                                   false), 0);
  assert_int_equal (stats (e).subgranule_bytes, fragments - KiB);
  engine_flush_begin (e, &f);
  assert_int_equal (f.total_bytes, whole - 4 * KiB);
  engine_close (e);
}

static uint64_t
thread_cpu_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Statistics and a flush's total cost O(1), not a walk of the map:
 * twenty of each take less CPU than copying the map out once (what
 * they did before, a batch at a time).  CPU time of this thread, so a
 * busy machine does not change the comparison.
 */
static void
test_stats_do_not_walk (void **state)
{
  enum { EXTENTS = 100000, CALLS = 20 };
  static const char *const keys[] = { "delay", "1h", NULL };
  struct mem_backend *mem = mem_backend_new (2 * EXTENTS * 512, 512, 64 * MiB);
  struct engine *e = open_engine_on (mem, NULL, keys);
  struct engine_flush f;
  struct extent batch[512];
  uint64_t from = 0, t0, walk_ns, calls_ns;
  uint32_t now;
  size_t n;

  for (uint64_t i = 0; i < EXTENTS; i++)
    assert_int_equal (engine_trim (e, i * 1024, 512, false), 0);
  assert_int_equal (stats (e).pending_extents, EXTENTS);

  t0 = thread_cpu_ns ();
  while ((n = engine_dump_batch (e, from, batch, 512, &now)) > 0)
    from = batch[n - 1].offset + batch[n - 1].length;
  walk_ns = thread_cpu_ns () - t0;

  t0 = thread_cpu_ns ();
  for (int i = 0; i < CALLS; i++) {
    assert_int_equal (stats (e).pending_extents, EXTENTS);
    engine_flush_begin (e, &f);
  }
  calls_ns = thread_cpu_ns () - t0;
  print_message ("one walk of %d extents: %llu us; %d statistics and "
                 "flush totals: %llu us\n", EXTENTS,
                 (unsigned long long) walk_ns / 1000, CALLS,
                 (unsigned long long) calls_ns / 1000);
  assert_true (calls_ns < walk_ns);
  engine_close (e);
}

static void
test_flush_reports_error (void **state)
{
  static const char *const keys[] = { "delay", "1h", NULL };
  struct mem_backend *mem;
  struct engine *e = open_engine (&mem, keys);
  struct engine_flush f;
  struct engine_flush_progress p;

  assert_int_equal (engine_start (e), 0);
  assert_int_equal (engine_trim (e, 0, 64 * KiB, false), 0);
  mem->fail_errno = EIO;
  mem->fail_count = 1;
  engine_flush_begin (e, &f);
  assert_int_equal (wait_flush (e, &f, &p), -1);
  assert_int_equal (errno, EIO);
  /* Kept pending, for a retry. */
  assert_int_equal (stats (e).pending_bytes, 64 * KiB);
  engine_flush_begin (e, &f);
  assert_int_equal (wait_flush (e, &f, &p), 1);
  assert_int_equal (stats (e).pending_bytes, 0);
  engine_close (e);
}

/* Without a flusher nothing completes; a stop ends the wait. */
static void
test_flush_ends_at_stop (void **state)
{
  struct engine *e = open_engine (NULL, NULL);
  struct engine_flush f;
  struct engine_flush_progress p;

  assert_int_equal (engine_trim (e, 0, 64 * KiB, false), 0);
  engine_flush_begin (e, &f);
  assert_int_equal (engine_flush_wait (e, &f, 50, &p), 0);
  assert_int_equal (p.total_bytes, 64 * KiB);
  engine_stop (e, 1000);
  assert_int_equal (engine_flush_wait (e, &f, 50, &p), -1);
  assert_int_equal (errno, ESHUTDOWN);
  engine_close (e);
}

static uint64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct waiter {
  struct engine *e;
  struct engine_flush f;
  uint64_t took_ms;
  int r;
};

static void *
wait_300ms (void *opaque)
{
  struct waiter *w = opaque;
  struct engine_flush_progress p;
  uint64_t t0 = now_ms ();

  w->r = engine_flush_wait (w->e, &w->f, 300, &p);
  w->took_ms = now_ms () - t0;
  return NULL;
}

/* The timeout bounds the whole wait, however often the waiter wakes:
 * other flushes completing every 50 ms wake it for two seconds (its own
 * ticket, far past the last issued, never completes).
 */
static void
test_flush_wait_keeps_its_timeout (void **state)
{
  struct engine *e = open_engine (NULL, NULL);
  struct waiter w = { .e = e };
  struct engine_flush f;
  struct engine_flush_progress p;
  pthread_t t;

  assert_int_equal (engine_start (e), 0);
  engine_flush_begin (e, &w.f);
  assert_int_equal (engine_flush_wait (e, &w.f, 10000, &p), 1);
  w.f.ticket += 1000000;
  assert_int_equal (pthread_create (&t, NULL, wait_300ms, &w), 0);
  for (int i = 0; i < 40; i++) {
    engine_flush_begin (e, &f);
    assert_int_equal (engine_flush_wait (e, &f, 10000, &p), 1);
    usleep (50000);
  }
  pthread_join (t, NULL);
  assert_int_equal (w.r, 0);
  if (w.took_ms > 1500)
    fail_msg ("a 300 ms wait took %llu ms", (unsigned long long) w.took_ms);
  engine_close (e);
}

static bool
is_socket (const char *path, mode_t *mode)
{
  struct stat st;

  if (lstat (path, &st) == -1 || !S_ISSOCK (st.st_mode))
    return false;
  *mode = st.st_mode & 0777;
  return true;
}

/* The socket exists once the service is open (before any fork), and is
 * served once it starts.
 */
static void
test_explicit_socket (void **state)
{
  const char *keys[] = { "ctl", sock, NULL };
  struct service *s = open_service (keys);
  mode_t mode;

  assert_true (is_socket (sock, &mode));
  assert_int_equal (mode, 0600);
  assert_string_equal (service_ctl_path (s), sock);
  assert_int_equal (service_start (s), 0);
  assert_true (is_socket (sock, &mode));
  /* A second server on a live socket does not open, and that socket
   * stays.
   */
  assert_null (try_open_service (keys));
  assert_true (is_socket (sock, &mode));
  service_stop (s);
  assert_int_equal (access (sock, F_OK), -1);
  service_close (s);
}

/* A service that opens and never starts (the front-end failed after
 * service_open) removes its socket.
 */
static void
test_socket_removed_without_start (void **state)
{
  const char *keys[] = { "ctl", sock, NULL };
  struct service *s = open_service (keys);
  mode_t mode;

  assert_true (is_socket (sock, &mode));
  service_close (s);
  assert_int_equal (access (sock, F_OK), -1);
}

static void
test_stale_socket_replaced (void **state)
{
  const char *keys[] = { "ctl", sock, NULL };
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM, 0);
  struct service *s;
  mode_t mode;

  /* Bound but never listening: what a killed server leaves. */
  snprintf (sun.sun_path, sizeof sun.sun_path, "%s", sock);
  assert_int_equal (bind (fd, (struct sockaddr *) &sun, sizeof sun), 0);
  close (fd);
  s = open_service (keys);
  assert_int_equal (service_start (s), 0);
  assert_true (is_socket (sock, &mode));
  service_close (s);
}

static void
test_other_file_kept (void **state)
{
  const char *keys[] = { "ctl", sock, NULL };
  FILE *fp = fopen (sock, "w");

  assert_non_null (fp);
  fclose (fp);
  assert_null (try_open_service (keys));
  assert_int_equal (access (sock, F_OK), 0);

  keys[1] = "/nonexistent-dir/ctl.sock";
  assert_null (try_open_service (keys));
}

/* Without ctl=: $XDG_RUNTIME_DIR/discardcache/PID.sock, the directory
 * made private.
 */
static void
test_default_path (void **state)
{
  struct service *s;
  char path[256];
  struct stat st;
  mode_t mode;

  setenv ("XDG_RUNTIME_DIR", dir, 1);
  s = open_service (NULL);
  snprintf (path, sizeof path, "%s/discardcache/%d.sock", dir, (int) getpid ());
  assert_true (is_socket (path, &mode));
  assert_int_equal (service_start (s), 0);
  assert_true (is_socket (path, &mode));
  assert_int_equal (mode, 0600);
  snprintf (path, sizeof path, "%s/discardcache", dir);
  assert_int_equal (stat (path, &st), 0);
  assert_int_equal (st.st_mode & 0777, 0700);
  service_close (s);
  snprintf (path, sizeof path, "%s/discardcache/%d.sock", dir, (int) getpid ());
  assert_int_equal (access (path, F_OK), -1);

  /* A default directory others may write to is not used; the server
   * still opens and serves (only an explicit ctl= is fatal).
   */
  snprintf (path, sizeof path, "%s/discardcache", dir);
  assert_int_equal (chmod (path, 0777), 0);
  s = open_service (NULL);
  assert_null (service_ctl_path (s));
  assert_int_equal (service_start (s), 0);
  snprintf (path, sizeof path, "%s/discardcache/%d.sock", dir, (int) getpid ());
  assert_int_equal (access (path, F_OK), -1);
  service_close (s);
  unsetenv ("XDG_RUNTIME_DIR");
}

/* The greeting's pid from the server at path, or -1. */
static int
hello_pid (const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM, 0), pid = -1;
  char buf[512] = "";
  const char *p;
  ssize_t n;

  assert_true (strlen (path) < sizeof sun.sun_path);
  memcpy (sun.sun_path, path, strlen (path) + 1);
  if (connect (fd, (struct sockaddr *) &sun, sizeof sun) == 0 &&
      (n = read (fd, buf, sizeof buf - 1)) > 0 &&
      (p = strstr (buf, "\"pid\":")) != NULL)
    pid = atoi (p + 6);
  close (fd);
  return pid;
}

/* What nbdkit and discardfuse do: open (the default socket is bound at
 * the parent's PID.sock), fork, start in the child.  The child's start
 * renames the socket to its own pid, and it answers there.
 */
static void
test_default_path_after_fork (void **state)
{
  char parent_path[256], child_path[256];
  struct service *s;
  int status;
  pid_t child;

  setenv ("XDG_RUNTIME_DIR", dir, 1);
  s = open_service (NULL);
  snprintf (parent_path, sizeof parent_path, "%s/discardcache/%d.sock", dir,
            (int) getpid ());
  assert_string_equal (service_ctl_path (s), parent_path);
  child = fork ();
  assert_true (child >= 0);
  if (child == 0) {
    bool ok = service_start (s) == 0;

    snprintf (child_path, sizeof child_path, "%s/discardcache/%d.sock", dir,
              (int) getpid ());
    ok = ok && strcmp (service_ctl_path (s), child_path) == 0 &&
         access (parent_path, F_OK) == -1 &&
         hello_pid (child_path) == getpid ();
    service_close (s);
    ok = ok && access (child_path, F_OK) == -1;
    _exit (ok ? 0 : 1);
  }
  assert_int_equal (waitpid (child, &status, 0), child);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
  /* nbdkit's parent exits here; this one frees its copy, whose socket
   * name is gone.
   */
  assert_int_equal (access (parent_path, F_OK), -1);
  service_close (s);
  unsetenv ("XDG_RUNTIME_DIR");
}

static void
test_ctl_keys (void **state)
{
  struct service_config cfg;
  char longpath[200];

  service_config_init (&cfg);
  assert_int_equal (service_config_set (&cfg, "ctl", "none"), 0);
  assert_true (cfg.ctl_disabled);
  assert_int_equal (service_config_set (&cfg, "ctl", "rel.sock"), 0);
  assert_false (cfg.ctl_disabled);
  assert_int_equal (cfg.ctl[0], '/');
  memset (longpath, 'x', sizeof longpath - 1);
  longpath[0] = '/';
  longpath[sizeof longpath - 1] = '\0';
  assert_int_equal (service_config_set (&cfg, "ctl", longpath), -1);
  assert_int_equal (service_config_set (&cfg, "ctl", ""), -1);
  assert_int_equal (service_config_set (&cfg, "state", ""), -1);
  assert_int_equal (service_config_set (&cfg, "state", "s.state"), 0);
  assert_int_equal (cfg.engine.state[0], '/');
  service_config_free (&cfg);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown (name, setup, teardown)
    T (test_flush_ignores_delay_minlen_pause),
    T (test_totals),
    T (test_stats_do_not_walk),
    T (test_flush_reports_error),
    T (test_flush_ends_at_stop),
    T (test_flush_wait_keeps_its_timeout),
    T (test_explicit_socket),
    T (test_socket_removed_without_start),
    T (test_stale_socket_replaced),
    T (test_other_file_kept),
    T (test_default_path),
    T (test_default_path_after_fork),
    cmocka_unit_test (test_ctl_keys),
#undef T
  };

  return cmocka_run_group_tests_name ("engine-ctl", tests, NULL, NULL);
}
