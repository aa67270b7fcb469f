/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests: scratch directories (see scratch.h). */
#include <config.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "scratch.h"

void
scratch_make (char *dir, size_t n, const char *name)
{
  const char *tmp = getenv ("TMPDIR");

  if ((size_t) snprintf (dir, n, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
                         name) >= n || mkdtemp (dir) == NULL) {
    perror ("scratch_make");
    abort ();
  }
}

static int
remove_one (const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  return remove (path);
}

void
scratch_remove (const char *dir)
{
  nftw (dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
