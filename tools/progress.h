/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: discardctl's flush progress: a bar redrawn in place on a
 * terminal, fitted to its width ($COLUMNS, else TIOCGWINSZ, else 80),
 * plain lines (at most one a second) otherwise.
 */
#ifndef DISCARDCACHE_PROGRESS_H
#define DISCARDCACHE_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct progress {
  FILE *fp;
  bool tty;
  bool drawn;                  /* a bar is on the current line */
  uint64_t last_line_ms;       /* when the last plain line was printed */
};

/* Report progress on fp (a terminal or not: isatty decides). */
extern void progress_init (struct progress *p, FILE *fp);

/* done of total bytes forwarded after elapsed_ms. */
extern void progress_update (struct progress *p, uint64_t done,
                             uint64_t total, uint64_t elapsed_ms);

/* End the bar's line, so what follows starts on a fresh one. */
extern void progress_end (struct progress *p);

#endif /* DISCARDCACHE_PROGRESS_H */
