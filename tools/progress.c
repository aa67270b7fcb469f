/* discardcache: discardctl's flush progress (see progress.h). */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "human.h"
#include "progress.h"

#define BAR_WIDTH 30
#define LINE_INTERVAL_MS 1000

void
progress_init (struct progress *p, FILE *fp)
{
  *p = (struct progress) { .fp = fp, .tty = isatty (fileno (fp)) };
}

/* "1.2 GiB of 2.7 GiB, 350.0 MiB/s, ETA 4.1 s" */
static void
describe (char *buf, size_t n, uint64_t done, uint64_t total,
          uint64_t elapsed_ms)
{
  char a[HUMAN_LEN], b[HUMAN_LEN], r[HUMAN_LEN], eta[HUMAN_LEN] = "?";
  uint64_t rate = elapsed_ms ? done * 1000 / elapsed_ms : 0;

  if (rate && total > done)
    human_duration ((total - done) * 1000 / rate, eta);
  else if (total <= done)
    snprintf (eta, sizeof eta, "0 s");
  snprintf (buf, n, "%s of %s, %s/s, ETA %s", human_size (done, a),
            human_size (total, b), human_size (rate, r), eta);
}

void
progress_update (struct progress *p, uint64_t done, uint64_t total,
                 uint64_t elapsed_ms)
{
  unsigned pct = total ? (done >= total ? 100 : done * 100 / total) : 100;
  char text[128], bar[BAR_WIDTH + 1];

  describe (text, sizeof text, done, total, elapsed_ms);
  if (!p->tty) {
    if (p->last_line_ms && elapsed_ms < p->last_line_ms + LINE_INTERVAL_MS)
      return;
    p->last_line_ms = elapsed_ms ? elapsed_ms : 1;
    fprintf (p->fp, "flush: %u%%: %s\n", pct, text);
    fflush (p->fp);
    return;
  }
  for (int i = 0; i < BAR_WIDTH; i++)
    bar[i] = i < (int) (pct * BAR_WIDTH / 100) ? '#' : '.';
  bar[BAR_WIDTH] = '\0';
  fprintf (p->fp, "\r\033[Kflush [%s] %3u%% %s", bar, pct, text);
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
