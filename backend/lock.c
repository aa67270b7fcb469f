/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the lock that keeps a second server off a regular-file
 * backend (backend_lock in backend.h).
 *
 * An open file description (OFD) lock on the whole file, as QEMU locks
 * its images: it belongs to the open file, not to the process, so it
 * survives nbdkit's and discardfuse's fork into the background (a POSIX
 * lock would not), and it goes when the last descriptor on that open
 * file is closed, however the server ends.  It conflicts with other OFD
 * and POSIX locks (QEMU's included), not with flock(2).
 *
 * F_OFD_GETLK reports the pid of an OFD lock's holder as -1, and so
 * does /proc/locks on Linux 6.18; the holder is found instead in
 * /proc/PID/fdinfo/FD, which lists the locks held through that
 * descriptor ("lock:" lines), for the descriptors open on this file.
 */
#include <config.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"

/* Holders named in the message, at most. */
#define MAX_HOLDERS 4

/* Whether /proc/PID/fdinfo/FD shows a lock held through that descriptor. */
static bool
fd_holds_lock (const char *pid, const char *fd)
{
  char path[600], line[256];
  bool found = false;
  FILE *fp;

  snprintf (path, sizeof path, "/proc/%s/fdinfo/%s", pid, fd);
  if ((fp = fopen (path, "re")) == NULL)
    return false;
  while (!found && fgets (line, sizeof line, fp))
    found = strncmp (line, "lock:", 5) == 0 &&
            (strstr (line, "OFDLCK") || strstr (line, "POSIX"));
  fclose (fp);
  return found;
}

/* Whether process pid holds a lock on the file st through any of its
 * descriptors.
 */
static bool
process_holds_lock (const char *pid, const struct stat *st)
{
  char path[320];
  struct dirent *d;
  struct stat fst;
  bool found = false;
  DIR *dir;

  snprintf (path, sizeof path, "/proc/%s/fd", pid);
  if ((dir = opendir (path)) == NULL)
    return false;
  while (!found && (d = readdir (dir)) != NULL) {
    if (!isdigit ((unsigned char) d->d_name[0]) ||
        fstatat (dirfd (dir), d->d_name, &fst, 0) == -1 ||
        fst.st_dev != st->st_dev || fst.st_ino != st->st_ino)
      continue;
    found = fd_holds_lock (pid, d->d_name);
  }
  closedir (dir);
  return found;
}

/* Append "PID (COMM)" for pid to the list in buf. */
static void
add_holder (char *buf, size_t n, const char *pid)
{
  char path[320], comm[64] = "?";
  size_t len = strlen (buf);
  FILE *fp;

  snprintf (path, sizeof path, "/proc/%s/comm", pid);
  if ((fp = fopen (path, "re")) != NULL) {
    if (fgets (comm, sizeof comm, fp))
      comm[strcspn (comm, "\n")] = '\0';
    fclose (fp);
  }
  /* One that does not fit is left out whole. */
  if (snprintf (buf + len, n - len, "%s%s (%s)", len ? ", " : "", pid,
                comm) >= (int) (n - len))
    buf[len] = '\0';
}

/* The processes that hold a lock on the file open on fd, as
 * "1234 (nbdkit), 1240 (discardfuse)", and how many; none if none can be
 * seen (they run as another user in a stricter /proc, or in another pid
 * namespace).
 */
static int
find_holders (int fd, char *buf, size_t n)
{
  struct dirent *d;
  struct stat st;
  int found = 0;
  DIR *proc;

  buf[0] = '\0';
  if (fstat (fd, &st) == -1 || (proc = opendir ("/proc")) == NULL)
    return 0;
  while (found < MAX_HOLDERS && (d = readdir (proc)) != NULL)
    if (isdigit ((unsigned char) d->d_name[0]) &&
        process_holds_lock (d->d_name, &st)) {
      add_holder (buf, n, d->d_name);
      found++;
    }
  closedir (proc);
  return found;
}

int
backend_lock_fd (struct backend *b, int fd)
{
  struct flock fl = {
    .l_type = b->limits.read_only ? F_RDLCK : F_WRLCK,
    .l_whence = SEEK_SET,       /* l_start 0, l_len 0: the whole file */
  };
  const char *name = b->identity.name;
  char holders[256];
  int n;

  if (fcntl (fd, F_OFD_SETLK, &fl) == 0) {
    dc_debug ("backend %s: locked (%s)", name,
              b->limits.read_only ? "shared" : "exclusive");
    return 0;
  }
  if (errno == EAGAIN || errno == EACCES) {
    n = find_holders (fd, holders, sizeof holders);
    dc_error ("backend=%s: in use: locked by %s%s: stop %s first, or add "
              "locking=off to share the file at your own risk (each server "
              "may forward its discards over data the other wrote)", name,
              n == 0 ? "another process (not visible here)" :
              n == 1 ? "pid " : "pids ", holders, n > 1 ? "them" : "it");
    errno = EAGAIN;
    return -1;
  }
  /* No such locks here (an old kernel, some network file systems): serve
   * unlocked, as QEMU's locking=auto does.
   */
  if (errno == EINVAL || errno == ENOLCK || errno == EOPNOTSUPP) {
    dc_debug ("backend %s: not locked: the file system has no OFD locks "
              "(%m)", name);
    return 0;
  }
  dc_error ("backend=%s: cannot lock: %m", name);
  return -1;
}
