/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the table of keys (keys.h) as --help's list.  It reads
 * the table and calls nothing else of the service.
 */
#include <config.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "keys.h"

/* --help's layout: "key=FORMS" in the first column, the text from
 * HELP_COLUMN, lines of at most HELP_WIDTH characters.
 */
#define HELP_COLUMN 25
#define HELP_WIDTH 79

const char *
service_key_default (const struct service_key *k)
{
  return k->def ? k->def : k->def_text ? k->def_text : "required";
}

/* Start a new line at HELP_COLUMN. */
static void
new_line (FILE *fp, int *col)
{
  fprintf (fp, "\n%*s", HELP_COLUMN, "");
  *col = HELP_COLUMN;
}

/* Write text word by word from column *col, breaking lines before
 * HELP_WIDTH and starting each new one at HELP_COLUMN.  With whole, text
 * that fits on a line of its own is not broken.
 */
static void
put_wrapped (FILE *fp, const char *text, int *col, bool whole)
{
  int len = strlen (text);

  if (whole && *col > HELP_COLUMN && *col + 1 + len > HELP_WIDTH &&
      HELP_COLUMN + len <= HELP_WIDTH)
    new_line (fp, col);
  while (*text) {
    size_t n = strcspn (text, " ");

    if (*col > HELP_COLUMN && *col + 1 + (int) n > HELP_WIDTH)
      new_line (fp, col);
    else if (*col > HELP_COLUMN) {
      fputc (' ', fp);
      (*col)++;
    }
    fprintf (fp, "%.*s", (int) n, text);
    *col += n;
    text += n;
    text += strspn (text, " ");
  }
}

static void
put_key (FILE *fp, const struct service_key *k)
{
  char lead[64], tail[160];
  int col = snprintf (lead, sizeof lead, "%s=%s", k->name, k->forms);

  fputs (lead, fp);
  if (col < HELP_COLUMN - 1) {
    fprintf (fp, "%*s", HELP_COLUMN - col, "");
    col = HELP_COLUMN;
  }
  else
    new_line (fp, &col);
  put_wrapped (fp, k->help, &col, false);
  if (k->def == NULL && k->def_text == NULL)
    snprintf (tail, sizeof tail, "(required)");
  else
    snprintf (tail, sizeof tail, "(default: %s)%s", service_key_default (k),
              k->runtime ? " [set]" : "");
  put_wrapped (fp, tail, &col, true);
  fputc ('\n', fp);
}

int
service_keys_write_help (FILE *fp, unsigned frontend)
{
  for (size_t i = 0; i < service_nkeys; i++)
    if (service_keys[i].frontends & frontend)
      put_key (fp, &service_keys[i]);
  fputs ("[set]: discardctl set KEY=VALUE changes it while the server runs.\n",
         fp);
  return ferror (fp) ? -1 : 0;
}
