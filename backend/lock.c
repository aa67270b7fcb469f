/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the lock that keeps a second server off a regular-file
 * backend (backend_lock in backend.h), and who holds a block device that
 * its exclusive open found busy (backend_explain_busy).
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
#include <sys/sysmacros.h>
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

/* Which descriptor a holder is found by: pid's descriptor fd is open on
 * fst (what it points to).
 */
typedef bool holds_fn (const char *pid, const char *fd,
                       const struct stat *fst, const struct stat *want);

/* A lock on the file want through this descriptor. */
static bool
holds_lock (const char *pid, const char *fd, const struct stat *fst,
            const struct stat *want)
{
  return fst->st_dev == want->st_dev && fst->st_ino == want->st_ino &&
         fd_holds_lock (pid, fd);
}

/* The block device want open through this descriptor. */
static bool
holds_blkdev (const char *pid, const char *fd, const struct stat *fst,
              const struct stat *want)
{
  return S_ISBLK (fst->st_mode) && fst->st_rdev == want->st_rdev;
}

/* Whether process pid holds want (as holds says) through any of its
 * descriptors.
 */
static bool
process_holds (const char *pid, holds_fn *holds, const struct stat *want)
{
  char path[320];
  struct dirent *d;
  struct stat fst;
  bool found = false;
  DIR *dir;

  snprintf (path, sizeof path, "/proc/%s/fd", pid);
  if ((dir = opendir (path)) == NULL)
    return false;
  while (!found && (d = readdir (dir)) != NULL)
    found = isdigit ((unsigned char) d->d_name[0]) &&
            fstatat (dirfd (dir), d->d_name, &fst, 0) == 0 &&
            holds (pid, d->d_name, &fst, want);
  closedir (dir);
  return found;
}

/* Whether pid serves discardcache: one of its front-ends, or nbdkit with
 * the plugin mapped.
 */
static bool
is_discardcache (const char *pid, const char *comm)
{
  char path[320], line[512];
  bool found = false;
  FILE *fp;

  if (strcmp (comm, "discardfuse") == 0 || strcmp (comm, "discardublk") == 0)
    return true;
  snprintf (path, sizeof path, "/proc/%s/maps", pid);
  if ((fp = fopen (path, "re")) == NULL)
    return false;
  while (!found && fgets (line, sizeof line, fp))
    found = strstr (line, "nbdkit-discardcache-plugin") != NULL;
  fclose (fp);
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
  if (snprintf (buf + len, n - len, "%s%s (%s%s)", len ? ", " : "", pid,
                comm, is_discardcache (pid, comm) ? ", discardcache" : "")
      >= (int) (n - len))
    buf[len] = '\0';
}

/* The processes that hold want (as holds says), as "1234 (nbdkit,
 * discardcache), 1240 (qemu-nbd)", and how many; none if none can be
 * seen (they run as another user in a stricter /proc, or in another pid
 * namespace).
 */
static int
find_holders (holds_fn *holds, const struct stat *want, char *buf, size_t n)
{
  char self[32];
  struct dirent *d;
  int found = 0;
  DIR *proc;

  buf[0] = '\0';
  if ((proc = opendir ("/proc")) == NULL)
    return 0;
  snprintf (self, sizeof self, "%d", (int) getpid ());
  while (found < MAX_HOLDERS && (d = readdir (proc)) != NULL)
    if (isdigit ((unsigned char) d->d_name[0]) &&
        strcmp (d->d_name, self) != 0 &&
        process_holds (d->d_name, holds, want)) {
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
    struct stat st;

    n = fstat (fd, &st) == 0 ?
      find_holders (holds_lock, &st, holders, sizeof holders) : 0;
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

/* Where dev is mounted, from /proc/self/mountinfo (its third field is
 * MAJ:MIN, its fifth the mount point); whether it is.
 */
static bool
find_mount (dev_t dev, char *buf, size_t n)
{
  char line[4096], want[32], at[1024];
  bool found = false;
  FILE *fp;

  snprintf (want, sizeof want, "%u:%u", major (dev), minor (dev));
  if ((fp = fopen ("/proc/self/mountinfo", "re")) == NULL)
    return false;
  while (!found && fgets (line, sizeof line, fp)) {
    char majmin[32];

    found = sscanf (line, "%*s %*s %31s %*s %1023s", majmin, at) == 2 &&
            strcmp (majmin, want) == 0;
  }
  fclose (fp);
  if (found && (size_t) snprintf (buf, n, "%s", at) >= n)
    buf[n - 1] = '\0';
  return found;
}

/* The first device built on dev (dm, md), from sysfs's holders/. */
static bool
find_stacked (dev_t dev, char *buf, size_t n)
{
  char path[64];
  struct dirent *d;
  bool found = false;
  DIR *dir;

  snprintf (path, sizeof path, "/sys/dev/block/%u:%u/holders", major (dev),
            minor (dev));
  if ((dir = opendir (path)) == NULL)
    return false;
  while (!found && (d = readdir (dir)) != NULL)
    if (d->d_name[0] != '.') {
      snprintf (buf, n, "%s", d->d_name);
      found = true;
    }
  closedir (dir);
  return found;
}

void
backend_explain_busy (const struct stat *st, char *buf, size_t n)
{
  char what[1024];
  int k;

  if ((k = find_holders (holds_blkdev, st, what, sizeof what)) > 0)
    snprintf (buf, n, "open exclusively by %s %s", k == 1 ? "pid" : "pids",
              what);
  else if (find_mount (st->st_rdev, what, sizeof what))
    snprintf (buf, n, "mounted at %s", what);
  else if (find_stacked (st->st_rdev, what, sizeof what))
    snprintf (buf, n, "held by %s, a device built on it (dm, md)", what);
  else
    snprintf (buf, n, "held by the kernel or a process not visible here "
              "(mounted in another namespace, swap, a dm or md member?)");
}
