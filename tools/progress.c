/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: discardctl's flush progress (see progress.h). */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "human.h"
#include "progress.h"

#define LINE_INTERVAL_MS 1000
#define DEFAULT_COLUMNS 80
/* The bar between the brackets: never narrower (the text gives way
 * first), never wider (a 200-column bar says no more than a 60-column
 * one).
 */
#define BAR_MIN 10
#define BAR_MAX 60
/* "flush [", "] " and "100% ": what a bar line holds besides the bar
 * and the text.
 */
#define FRAME_LEN 14

void
progress_init (struct progress *p, FILE *fp)
{
  *p = (struct progress) { .fp = fp, .tty = isatty (fileno (fp)) };
}

/* The terminal's width: $COLUMNS (as the user or the shell set it), else
 * what the terminal says, else 80.  Asked at every redraw, so a resized
 * window is followed.
 */
static unsigned
terminal_columns (int fd)
{
  const char *env = getenv ("COLUMNS");
  struct winsize ws;
  char *end;
  unsigned long n;

  if (env && *env) {
    n = strtoul (env, &end, 10);
    if (*end == '\0' && n > 0 && n < 10000)
      return n;
  }
  if (ioctl (fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return DEFAULT_COLUMNS;
}

/* The text after the bar, as detailed as fits in room columns: "1.2 GiB
 * of 2.7 GiB, 350.0 MiB/s, ETA 4.1 s", then without the rate, then the
 * ETA alone, then nothing.
 */
static void
describe (char *buf, size_t n, size_t room, uint64_t done, uint64_t total,
          uint64_t elapsed_ms)
{
  char a[HUMAN_LEN], b[HUMAN_LEN], r[HUMAN_LEN], eta[HUMAN_LEN] = "?";
  uint64_t rate = elapsed_ms ? done * 1000 / elapsed_ms : 0;

  if (rate && total > done)
    human_duration ((total - done) * 1000 / rate, eta);
  else if (total <= done)
    snprintf (eta, sizeof eta, "0 s");
  human_size (done, a);
  human_size (total, b);
  human_size (rate, r);
  if ((size_t) snprintf (buf, n, "%s of %s, %s/s, ETA %s", a, b, r, eta) <= room)
    return;
  if ((size_t) snprintf (buf, n, "%s of %s, ETA %s", a, b, eta) <= room)
    return;
  if ((size_t) snprintf (buf, n, "ETA %s", eta) <= room)
    return;
  buf[0] = '\0';
}

/* A line a second, for logs and pipes: their width is not ours to fit. */
static void
plain_line (struct progress *p, unsigned pct, uint64_t done, uint64_t total,
            uint64_t elapsed_ms)
{
  char text[128];

  if (p->last_line_ms && elapsed_ms < p->last_line_ms + LINE_INTERVAL_MS)
    return;
  p->last_line_ms = elapsed_ms ? elapsed_ms : 1;
  describe (text, sizeof text, sizeof text, done, total, elapsed_ms);
  fprintf (p->fp, "flush: %u%%: %s\n", pct, text);
  fflush (p->fp);
}

void
progress_update (struct progress *p, uint64_t done, uint64_t total,
                 uint64_t elapsed_ms)
{
  unsigned pct = total ? (done >= total ? 100 : done * 100 / total) : 100;
  /* The last column stays empty: writing into it makes some terminals
   * wrap, and the next \r would then redraw on a new line.
   */
  size_t width = terminal_columns (fileno (p->fp)) - 1;
  char text[128], bar[BAR_MAX + 1];
  size_t bar_len, text_len;

  if (!p->tty) {
    plain_line (p, pct, done, total, elapsed_ms);
    return;
  }
  if (width < FRAME_LEN + BAR_MIN) {
    /* Too narrow for a bar: the percentage alone, as far as it fits. */
    snprintf (text, sizeof text, "flush %3u%%", pct);
    fprintf (p->fp, "\r\033[K%.*s", (int) width, text);
  }
  else {
    describe (text, sizeof text, width - FRAME_LEN - BAR_MIN, done,
              total, elapsed_ms);
    text_len = strlen (text);
    bar_len = width - FRAME_LEN - text_len;
    if (bar_len > BAR_MAX)
      bar_len = BAR_MAX;
    for (size_t i = 0; i < bar_len; i++)
      bar[i] = i < pct * bar_len / 100 ? '#' : '.';
    bar[bar_len] = '\0';
    fprintf (p->fp, "\r\033[Kflush [%s] %3u%% %s", bar, pct, text);
  }
  fflush (p->fp);
  p->drawn = true;
}

void
progress_end (struct progress *p)
{
  if (p->drawn)
    fputc ('\n', p->fp);
  p->drawn = false;
}
