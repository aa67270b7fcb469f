/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: rbd:POOL/[NAMESPACE/]IMAGE[@SNAP], as rbd(8) writes an
 * image spec, split into its parts (rbd-internal.h).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rbd-internal.h"

static int
bad_spec (const char *spec, const char *why)
{
  dc_error ("backend=%s: %s: expected " RBD_SPEC_FORMS, spec, why);
  errno = EINVAL;
  return -1;
}

void
rbd_spec_free (struct rbd_spec *sp)
{
  free (sp->pool);
  free (sp->nspace);
  free (sp->image);
  free (sp->snap);
  memset (sp, 0, sizeof *sp);
}

/* Duplicate [p, p+n) into *out. */
static int
dup_part (const char *p, size_t n, char **out)
{
  *out = strndup (p, n);
  if (*out == NULL) {
    dc_error ("backend: out of memory");
    return -1;
  }
  return 0;
}

int
rbd_spec_parse (const char *spec, struct rbd_spec *sp)
{
  const char *rest = spec + 4;   /* after "rbd:" */
  const char *at = strchr (rest, '@');
  const char *end = at ? at : rest + strlen (rest);
  const char *s1 = memchr (rest, '/', end - rest);
  const char *s2 = s1 ? memchr (s1 + 1, '/', end - s1 - 1) : NULL;
  const char *image = s2 ? s2 + 1 : s1 ? s1 + 1 : NULL;

  memset (sp, 0, sizeof *sp);
  if (s1 == NULL)
    return bad_spec (spec, "no pool: the image must be named as POOL/IMAGE");
  if (s2 && memchr (s2 + 1, '/', end - s2 - 1))
    return bad_spec (spec, "too many '/'");
  if (s1 == rest || image == end || (s2 && s2 == s1 + 1))
    return bad_spec (spec, "an empty pool, namespace or image name");
  if (at && (at[1] == '\0' || strchr (at + 1, '@') || strchr (at + 1, '/')))
    return bad_spec (spec, "a bad snapshot name after '@'");
  if (dup_part (rest, s1 - rest, &sp->pool) == -1 ||
      dup_part (s1 + 1, s2 ? (size_t) (s2 - s1 - 1) : 0, &sp->nspace) == -1 ||
      dup_part (image, end - image, &sp->image) == -1 ||
      (at && dup_part (at + 1, strlen (at + 1), &sp->snap) == -1)) {
    rbd_spec_free (sp);
    errno = ENOMEM;
    return -1;
  }
  return 0;
}
