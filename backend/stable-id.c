/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: a name for a block device that follows the disk, not its
 * number (see internal.h).  A reboot renumbers disks (sda becomes sdb),
 * loop devices and dm minors; the state file and the journal are tied to
 * the store, so they ask for the name the kernel gives the hardware or
 * the mapping: the dm uuid, the WWID (SCSI/SATA VPD page 0x83, NVMe), the
 * serial (virtio, NVMe), or a loop device's backing file; a partition
 * adds its number to its disk's.  Read from /sys/dev/block/MAJ:MIN.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "internal.h"

/* Read one line of dir/attr into buf, blanks at both ends dropped and
 * inner runs of blanks folded to one (the VPD strings pad with spaces).
 * Whether a non-empty value was read.
 */
static bool
read_attr (const char *dir, const char *attr, char *buf, size_t n)
{
  char path[PATH_MAX], line[256];
  size_t out = 0;
  bool blank = false;
  FILE *fp;

  if ((size_t) snprintf (path, sizeof path, "%s/%s", dir, attr) >= sizeof path)
    return false;
  fp = fopen (path, "re");
  if (fp == NULL)
    return false;
  if (fgets (line, sizeof line, fp) == NULL)
    line[0] = '\0';
  fclose (fp);
  for (const char *p = line; *p && out + 1 < n; p++) {
    if (isspace ((unsigned char) *p)) {
      blank = out > 0;
      continue;
    }
    if (blank && out + 2 < n)
      buf[out++] = ' ';
    blank = false;
    buf[out++] = *p;
  }
  buf[out] = '\0';
  return out > 0;
}

/* The disk's own name, in the order of how stable and unique each is. */
static bool
disk_name (const char *dir, char *buf, size_t n)
{
  static const struct { const char *attr, *prefix; } names[] = {
    { "dm/uuid", "dm-uuid:" },
    { "wwid", "wwid:" },
    { "device/wwid", "wwid:" },
    { "serial", "serial:" },
    { "device/serial", "serial:" },
    { "loop/backing_file", "loop:" },
  };
  char value[200];

  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (read_attr (dir, names[i].attr, value, sizeof value)) {
      char nsid[16];

      /* An NVMe controller's serial names all its namespaces. */
      if (strcmp (names[i].attr, "device/serial") == 0 &&
          read_attr (dir, "nsid", nsid, sizeof nsid))
        return (size_t) snprintf (buf, n, "%s%s/ns%s", names[i].prefix,
                                  value, nsid) < n;
      return (size_t) snprintf (buf, n, "%s%s", names[i].prefix, value) < n;
    }
  return false;
}

bool
backend_stable_name (dev_t dev, char *buf, size_t n)
{
  char dir[64], part[16], real[PATH_MAX], disk[sizeof real + 4];

  snprintf (dir, sizeof dir, "/sys/dev/block/%u:%u", major (dev), minor (dev));
  if (!read_attr (dir, "partition", part, sizeof part))
    return disk_name (dir, buf, n);
  /* A partition's directory sits in its disk's. */
  if (realpath (dir, real) == NULL)
    return false;
  snprintf (disk, sizeof disk, "%s/..", real);
  if (!disk_name (disk, buf, n))
    return false;
  return strlen (buf) + strlen (part) + 6 < n &&
         strcat (strcat (buf, "-part"), part) != NULL;
}
