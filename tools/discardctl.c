/* SPDX-License-Identifier: BSD-3-Clause */
/* discardctl: control a running discardcache server through its control
 * socket: statistics, flush, dump, pause/resume, set, forget-clean.  See
 * discardctl(1).
 */
#include <config.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "ctl-client.h"
#include "ctl-proto.h"
#include "human.h"
#include "log.h"
#include "parse.h"
#include "progress.h"
#include "stats-format.h"
#include "stats-table.h"

#define USAGE \
  "Usage: discardctl [-s SOCKET] COMMAND [OPTIONS]\n" \
  "\n" \
  "Commands:\n" \
  "  stats [--json | --format=table|json|prometheus] [--watch[=INTERVAL]]\n" \
  "        [--count=N]         statistics, once or every INTERVAL (1s)\n" \
  "  stats --file=FILE [...]   the same from a statsfile= or discardfuse's\n" \
  "                            MOUNTPOINT/stats, without the socket\n" \
  "  flush [--wait] [--progress] [--reserve] [--json]\n" \
  "                            forward every pending discard now (and\n" \
  "                            with --reserve thin mode's reuse reserve)\n" \
  "  dump [--json]             pending extents: offset length age_ms\n" \
  "  dump --map [--json]       thin mode's map in runs: offset physical length\n" \
  "  pause | resume            stop or restart the flusher\n" \
  "  set KEY=VALUE...          change delay, minlen, idle, rate or budget\n" \
  "  forget-clean [--json]     forget what the backend has discarded, so\n" \
  "                            that every later TRIM reaches it again\n" \
  "  attach SOCKET /dev/nbdN [--connections=N] [--dead-timeout=DURATION]\n" \
  "        [--foreground] [--log=FILE] [--adopt]\n" \
  "                            connect the kernel's NBD device to the\n" \
  "                            server at SOCKET, reconnecting across its\n" \
  "                            restarts (a keeper process stays)\n" \
  "  detach /dev/nbdN          stop the keeper, disconnect the device\n" \
  "\n" \
  "Options:\n" \
  "  -s, --socket=SOCKET       the server's control socket (default:\n" \
  "                            $DISCARDCACHE_CTL, else the one socket in\n" \
  "                            $XDG_RUNTIME_DIR/discardcache or\n" \
  "                            /run/discardcache)\n" \
  "  -h, --help                this help\n" \
  "  -V, --version             the version\n" \
  "\n" \
  "Exit status: 0 ok, 1 the server answered with an error (or --file\n" \
  "holds no statistics), 2 usage, 3 cannot connect (or read --file).\n" \
  "See discardctl(1).\n"

enum stats_format { FORMAT_TABLE, FORMAT_JSON, FORMAT_PROMETHEUS };

struct cmdline {
  const char *socket;
  const char *command;
  bool json;                   /* stats, flush, dump */
  bool map;                    /* dump --map */
  enum stats_format format;
  bool watch;
  uint64_t interval_ms;
  uint64_t count;              /* watch refreshes, 0: until interrupted */
  const char *file;            /* stats --file */
  bool wait;
  bool progress;
  bool reserve;                /* flush --reserve */
  char **assignments;          /* set: KEY=VALUE words */
  int nassignments;
};

static int
usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static int
usage_error (const char *fmt, ...)
{
  va_list args;

  /* One line, the hint included: a script's log shows it whole. */
  fprintf (stderr, "discardctl: ");
  va_start (args, fmt);
  vfprintf (stderr, fmt, args);
  va_end (args);
  fprintf (stderr, " (try 'discardctl --help')\n");
  return EXIT_USAGE;
}

/* One request whose reply is a single line; --json prints it as sent. */
static int
simple_request (struct ctl_conn *conn, const char *request,
                struct jf_object *reply)
{
  int r = ctl_conn_send (conn, request);

  if (r != EXIT_OK)
    return r;
  while ((r = ctl_conn_read (conn, reply)) == 0)
    ;
  return r == -1 ? EXIT_CONNECT : ctl_conn_verdict (conn, reply);
}

static int
connect_and (const struct cmdline *cl, struct ctl_conn *conn)
{
  int r = ctl_conn_resolve (conn, cl->socket);

  return r == EXIT_OK ? ctl_conn_open (conn) : r;
}

/* The server's reply is the statistics object with "ok":true put first;
 * --json prints the object alone, byte for byte what a statsfile or
 * discardfuse's stats file holds.
 */
static void
print_stats_json (const char *raw)
{
  static const char envelope[] = "{\"ok\":true,";

  if (strncmp (raw, envelope, sizeof envelope - 1) == 0)
    printf ("{%s", raw + sizeof envelope - 1);
  else
    fputs (raw, stdout);
}

static void
print_stats (const struct cmdline *cl, const char *raw,
             const struct jf_object *st)
{
  if (cl->format == FORMAT_JSON)
    print_stats_json (raw);
  else if (cl->format == FORMAT_PROMETHEUS)
    stats_print_prometheus (st, stdout);
  else
    stats_print_table (st, stdout);
}

/* The live view's first line: rates since the previous sample. */
static void
print_rates (const struct cmdline *cl, const struct jf_object *st,
             uint64_t sample, uint64_t prev[3])
{
  uint64_t now[3] = { 0, 0, 0 };
  double secs = cl->interval_ms / 1000.0;
  char every[HUMAN_LEN], clock[HUMAN_LEN], rate[HUMAN_LEN];
  time_t t = time (NULL);

  jf_u64 (st, stats_key_name (STAT_trims), &now[0]);
  jf_u64 (st, stats_key_name (STAT_forwarded), &now[1]);
  jf_u64 (st, stats_key_name (STAT_forwarded_bytes), &now[2]);
  strftime (clock, sizeof clock, "%H:%M:%S", localtime (&t));
  printf ("every %s, %s: ", human_duration (cl->interval_ms, every), clock);
  if (sample == 0)
    printf ("rates from the next refresh\n");
  else
    printf ("%.0f trims/s, %.0f discards/s forwarded (%s/s)\n",
            (now[0] - prev[0]) / secs, (now[1] - prev[1]) / secs,
            human_size ((now[2] - prev[2]) / secs, rate));
  memcpy (prev, now, sizeof now);
}

/* stats --file: the object a statsfile= or discardfuse's stats file
 * holds, read whole into *text (parsed in place into st) and *raw (as
 * it is, for --json).  EXIT_OK, EXIT_CONNECT if the file cannot be read
 * or EXIT_SERVER if it holds no statistics object (reported).
 */
static int
read_stats_file (const char *path, char **text, char **raw,
                 struct jf_object *st)
{
  FILE *fp = fopen (path, "r");
  size_t cap = 0;
  ssize_t n;

  if (fp == NULL) {
    dc_error ("--file=%s: %m", path);
    return EXIT_CONNECT;
  }
  n = getdelim (text, &cap, '\0', fp);
  if (n == -1 && ferror (fp)) {
    dc_error ("--file=%s: %m", path);
    fclose (fp);
    return EXIT_CONNECT;
  }
  fclose (fp);
  if (n <= 0 || (*raw = strdup (*text)) == NULL ||
      jf_parse (*text, st) == -1 || jf_find (st, stats_key_name (STAT_trims)) == NULL) {
    dc_error ("--file=%s: not discardcache statistics (one JSON object, as "
              "statsfile= or discardfuse's MOUNTPOINT/stats holds)", path);
    return EXIT_SERVER;
  }
  return EXIT_OK;
}

/* One sample: from cl->file, or from the server over a fresh
 * connection, so that the view survives long intervals (the server drops
 * idle clients) and says at once when the server is gone.
 */
static int
cmd_stats (const struct cmdline *cl)
{
  bool tty = isatty (STDOUT_FILENO) && cl->format == FORMAT_TABLE;
  uint64_t prev[3] = { 0, 0, 0 };
  struct timespec ts = { cl->interval_ms / 1000, cl->interval_ms % 1000 * 1000000 };

  for (uint64_t i = 0; ; i++) {
    struct ctl_conn conn = CTL_CONN_INIT;
    struct jf_object st;
    char *text = NULL, *raw = NULL;
    int r;

    if (cl->file)
      r = read_stats_file (cl->file, &text, &raw, &st);
    else if ((r = connect_and (cl, &conn)) == EXIT_OK)
      r = simple_request (&conn, "stats", &st);
    if (r == EXIT_OK) {
      if (tty && cl->watch)
        printf ("\033[H\033[2J");
      if (cl->watch && cl->format == FORMAT_TABLE)
        print_rates (cl, &st, i, prev);
      print_stats (cl, cl->file ? raw : conn.raw, &st);
      if (cl->watch && cl->format == FORMAT_PROMETHEUS)
        putchar ('\n');
      fflush (stdout);
    }
    free (text);
    free (raw);
    ctl_conn_close (&conn);
    if (r != EXIT_OK || !cl->watch || (cl->count && i + 1 >= cl->count))
      return r;
    nanosleep (&ts, NULL);
  }
}

/* A flush reply's numbers, by the keys the server writes (0 where a
 * reply has none).
 */
static void
flush_numbers (const struct jf_object *o, uint64_t v[CTL_FLUSH_NKEYS])
{
  for (size_t k = 0; k < CTL_FLUSH_NKEYS; k++) {
    v[k] = 0;
    jf_u64 (o, ctl_flush_keys[k], &v[k]);
  }
}

static int
flush_summary (const struct cmdline *cl, struct ctl_conn *conn,
               const struct jf_object *o)
{
  uint64_t v[CTL_FLUSH_NKEYS];
  char a[HUMAN_LEN], b[HUMAN_LEN], c[HUMAN_LEN], d[HUMAN_LEN];

  if (cl->json) {
    fputs (conn->raw, stdout);
    return EXIT_OK;
  }
  flush_numbers (o, v);
  if (!cl->wait) {
    printf ("flush: started, %s forwardable\n",
            human_size (v[CTL_FLUSH_KEY_total_bytes], a));
    return EXIT_OK;
  }
  printf ("flush: done: %" PRIu64 " discards, %s in %s; still pending %s "
          "(sub-granule %s)\n", v[CTL_FLUSH_KEY_forwarded],
          human_size (v[CTL_FLUSH_KEY_forwarded_bytes], a),
          human_duration (v[CTL_FLUSH_KEY_elapsed_ms], b),
          human_size (v[CTL_FLUSH_KEY_pending_bytes], c),
          human_size (v[CTL_FLUSH_KEY_subgranule_bytes], d));
  return EXIT_OK;
}

static int
cmd_flush (const struct cmdline *cl, struct ctl_conn *conn)
{
  struct progress prog;
  struct jf_object o;
  char request[64];
  int r;

  snprintf (request, sizeof request, "flush%s%s%s",
            cl->wait ? " --wait" : "", cl->progress ? " --progress" : "",
            cl->reserve ? " --reserve" : "");
  if ((r = ctl_conn_send (conn, request)) != EXIT_OK)
    return r;
  progress_init (&prog, stdout);
  while ((r = ctl_conn_read (conn, &o)) == 0) {
    uint64_t v[CTL_FLUSH_NKEYS];

    flush_numbers (&o, v);
    if (cl->json)
      fputs (conn->raw, stdout);
    else
      progress_update (&prog, v[CTL_FLUSH_KEY_forwarded_bytes],
                       v[CTL_FLUSH_KEY_total_bytes],
                       v[CTL_FLUSH_KEY_elapsed_ms]);
  }
  progress_end (&prog);
  if (r == -1)
    return EXIT_CONNECT;
  r = ctl_conn_verdict (conn, &o);
  return r == EXIT_OK ? flush_summary (cl, conn, &o) : r;
}

static int
cmd_dump (const struct cmdline *cl, struct ctl_conn *conn)
{
  struct jf_object o;
  int r = ctl_conn_send (conn, cl->map ? "dump --map" : "dump");
  /* The third column: an extent's age, or a mapped run's place. */
  const char *third = cl->map ? "physical" : "age_ms";

  if (r != EXIT_OK)
    return r;
  while ((r = ctl_conn_read (conn, &o)) == 0) {
    uint64_t offset, length, v;

    if (cl->json)
      fputs (conn->raw, stdout);
    else if (jf_u64 (&o, "offset", &offset) && jf_u64 (&o, "length", &length) &&
             jf_u64 (&o, third, &v)) {
      if (cl->map)
        printf ("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", offset, v, length);
      else
        printf ("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", offset, length, v);
    }
  }
  return r == -1 ? EXIT_CONNECT : ctl_conn_verdict (conn, &o);
}

static int
cmd_pause (const struct cmdline *cl, struct ctl_conn *conn)
{
  struct jf_object o;
  int r = simple_request (conn, cl->command, &o);

  if (r == EXIT_OK)
    printf ("%s\n", strcmp (cl->command, "pause") == 0
            ? "forwarding paused" : "forwarding resumed");
  return r;
}

static int
cmd_forget_clean (const struct cmdline *cl, struct ctl_conn *conn)
{
  uint64_t extents = 0, bytes = 0, max = 0;
  struct jf_object o;
  char a[HUMAN_LEN];
  int r = simple_request (conn, "forget-clean", &o);

  if (r != EXIT_OK)
    return r;
  if (cl->json) {
    fputs (conn->raw, stdout);
    return r;
  }
  jf_u64 (&o, "forgot_extents", &extents);
  jf_u64 (&o, "forgot_bytes", &bytes);
  jf_u64 (&o, "max_clean_extents", &max);
  if (max == 0)
    printf ("the known-clean map is off (max-clean-extents=off or "
            "passthrough=true): every TRIM reaches the device already\n");
  else
    printf ("forgot %" PRIu64 " known-clean extents (%s): every TRIM reaches "
            "the device again until it has discarded that range anew\n",
            extents, human_size (bytes, a));
  return r;
}

/* One request for every pair: the server checks them all before it
 * applies any, and answers a line for each.
 */
static int
cmd_set (const struct cmdline *cl, struct ctl_conn *conn)
{
  char request[CTL_MAX_LINE + 1] = "set";
  struct jf_object o;
  size_t len = 3;
  int r;

  for (int i = 0; i < cl->nassignments; i++)
    len += snprintf (request + len, sizeof request - len, " %s",
                     cl->assignments[i]);
  if ((r = ctl_conn_send (conn, request)) != EXIT_OK)
    return r;
  while ((r = ctl_conn_read (conn, &o)) >= 0) {
    if (jf_str (&o, "set") && jf_str (&o, "value"))
      printf ("%s=%s\n", jf_str (&o, "set"), jf_str (&o, "value"));
    if (r == 1)
      break;
  }
  return r == -1 ? EXIT_CONNECT : ctl_conn_verdict (conn, &o);
}

/* Command options.  Each returns EXIT_OK or EXIT_USAGE (reported). */

static int
parse_watch (struct cmdline *cl, const char *arg)
{
  cl->watch = true;
  if (arg == NULL)
    return EXIT_OK;
  /* One message for every refusal, 0 included: the parser's own. */
  if (parse_duration_ms ("--watch", arg, &cl->interval_ms) == -1 ||
      (cl->interval_ms == 0 &&
       parse_invalid ("--watch", arg,
                      "a duration above 0: " PARSE_DURATION_SYNTAX) == -1))
    return EXIT_USAGE;
  return EXIT_OK;
}

static int
parse_format (struct cmdline *cl, const char *arg)
{
  static const char *const names[] = { "table", "json", "prometheus" };

  for (int i = 0; i < 3; i++)
    if (strcmp (arg, names[i]) == 0) {
      cl->format = (enum stats_format) i;
      return EXIT_OK;
    }
  return usage_error ("--format=%s: expected table, json or prometheus", arg);
}

static int
parse_stats_option (struct cmdline *cl, int c, const char *arg)
{
  switch (c) {
  case 'j': cl->format = FORMAT_JSON; return EXIT_OK;
  case 'f': return parse_format (cl, arg);
  case 'w': return parse_watch (cl, arg);
  case 'F': cl->file = arg; return EXIT_OK;
  case 'n':
    if (parse_count ("--count", arg, UINT32_MAX, &cl->count) == -1)
      return EXIT_USAGE;
    return EXIT_OK;
  }
  return EXIT_USAGE;
}

/* getopt_long's complaint, as one line of ours (opterr is 0): c is '?'
 * for an option nobody knows, ':' for a missing value, or an option
 * known to another command.
 */
static int
option_error (const char *command, int c, char **argv,
              const struct option *opt)
{
  if (c == '?')
    return usage_error ("%s: unknown option '%s'", command, argv[optind - 1]);
  if (c == ':')
    return usage_error ("%s: option '%s' needs a value", command,
                        argv[optind - 1]);
  return usage_error ("%s: --%s is not an option of %s", command, opt->name,
                      command);
}

static int
parse_command_options (struct cmdline *cl, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'j' },
    { "format", required_argument, NULL, 'f' },
    { "watch", optional_argument, NULL, 'w' },
    { "count", required_argument, NULL, 'n' },
    { "file", required_argument, NULL, 'F' },
    { "wait", no_argument, NULL, 'W' },
    { "progress", no_argument, NULL, 'p' },
    { "map", no_argument, NULL, 'm' },
    { "reserve", no_argument, NULL, 'R' },
    { NULL, 0, NULL, 0 },
  };
  bool stats = strcmp (cl->command, "stats") == 0;
  bool flush = strcmp (cl->command, "flush") == 0;
  bool dump = strcmp (cl->command, "dump") == 0;
  bool forget = strcmp (cl->command, "forget-clean") == 0;
  int c, r, index = 0;

  optind = 0;
  opterr = 0;
  while ((c = getopt_long (argc, argv, "+:", opts, &index)) != -1) {
    if (c == 'j' && (flush || dump || forget))
      cl->json = true;
    else if (c == 'm' && dump)
      cl->map = true;
    else if (c == 'W' && flush)
      cl->wait = true;
    else if (c == 'p' && flush)
      cl->wait = cl->progress = true;
    else if (c == 'R' && flush)
      cl->reserve = true;
    else if (stats && c != '?' && c != ':' && c != 'W' && c != 'p' &&
             c != 'R') {
      if ((r = parse_stats_option (cl, c, optarg)) != EXIT_OK)
        return r;
    }
    else
      return option_error (cl->command, c, argv, &opts[index]);
  }
  if (strcmp (cl->command, "set") == 0) {
    cl->assignments = argv + optind;
    cl->nassignments = argc - optind;
    optind = argc;
  }
  if (optind < argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);
  return EXIT_OK;
}

static int
check_assignment (const char *a)
{
  if (strchr (a, '=') == NULL || a[0] == '=')
    return usage_error ("set %s: expected KEY=VALUE, e.g. set delay=10s", a);
  for (const char *p = a; *p; p++)
    if ((unsigned char) *p < 0x21 || (unsigned char) *p > 0x7e)
      return usage_error ("set %s: KEY=VALUE must be printable text without "
                          "spaces", a);
  return EXIT_OK;
}

/* The server checks the keys and values; this checks the words. */
static int
check_assignments (const struct cmdline *cl)
{
  size_t len = 3;
  int r;

  if (cl->nassignments == 0)
    return usage_error ("set: expected KEY=VALUE..., e.g. set delay=10s");
  if (cl->nassignments > CTL_SET_MAX)
    return usage_error ("set: %d pairs, at most %d", cl->nassignments,
                        CTL_SET_MAX);
  for (int i = 0; i < cl->nassignments; i++) {
    if ((r = check_assignment (cl->assignments[i])) != EXIT_OK)
      return r;
    len += 1 + strlen (cl->assignments[i]);
  }
  if (len > CTL_MAX_LINE)
    return usage_error ("set: the request would be %zu bytes, at most %d",
                        len, CTL_MAX_LINE);
  return EXIT_OK;
}

static int
parse_global (struct cmdline *cl, int argc, char **argv)
{
  static const struct option opts[] = {
    { "socket", required_argument, NULL, 's' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
  };
  int c;

  opterr = 0;
  while ((c = getopt_long (argc, argv, "+:s:hV", opts, NULL)) != -1) {
    switch (c) {
    case 's': cl->socket = optarg; break;
    case 'h': fputs (USAGE, stdout); exit (EXIT_OK);
    case 'V': printf ("discardctl (discardcache) %s\n", PACKAGE_VERSION); exit (EXIT_OK);
    case ':': return usage_error ("option '%s' needs a value", argv[optind - 1]);
    default: return usage_error ("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind == argc)
    return usage_error ("a command is required: stats, flush, dump, pause, "
                        "resume, set, forget-clean, attach or detach");
  return EXIT_OK;
}

int
main (int argc, char **argv)
{
  static const char *const commands[] = {
    "stats", "flush", "dump", "pause", "resume", "set", "forget-clean",
  };
  struct cmdline cl = { .interval_ms = 1000 };
  struct ctl_conn conn = CTL_CONN_INIT;
  bool known = false;
  int r;

  if ((r = parse_global (&cl, argc, argv)) != EXIT_OK)
    return r;
  cl.command = argv[optind];
  /* attach and detach talk to the kernel, not to a control socket. */
  if (strcmp (cl.command, "attach") == 0 || strcmp (cl.command, "detach") == 0)
    return attach_main (argc - optind, argv + optind);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    known |= strcmp (cl.command, commands[i]) == 0;
  if (!known)
    return usage_error ("unknown command '%s': expected stats, flush, dump, "
                        "pause, resume, set, forget-clean, attach or detach", cl.command);
  r = parse_command_options (&cl, argc - optind, argv + optind);
  if (r == EXIT_OK && strcmp (cl.command, "set") == 0)
    r = check_assignments (&cl);
  if (r == EXIT_OK && cl.file && cl.socket)
    r = usage_error ("stats: -s and --file name two sources: give one");
  if (r != EXIT_OK)
    return r;
  if (strcmp (cl.command, "stats") == 0)
    return cmd_stats (&cl);
  if ((r = connect_and (&cl, &conn)) == EXIT_OK) {
    if (strcmp (cl.command, "flush") == 0)
      r = cmd_flush (&cl, &conn);
    else if (strcmp (cl.command, "dump") == 0)
      r = cmd_dump (&cl, &conn);
    else if (strcmp (cl.command, "set") == 0)
      r = cmd_set (&cl, &conn);
    else if (strcmp (cl.command, "forget-clean") == 0)
      r = cmd_forget_clean (&cl, &conn);
    else
      r = cmd_pause (&cl, &conn);
  }
  ctl_conn_close (&conn);
  if (fflush (stdout) == EOF && r == EXIT_OK) {
    dc_error ("write error on standard output: %m");
    r = EXIT_SERVER;
  }
  return r;
}
