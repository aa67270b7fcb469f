/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache verifier: a concurrent, seeded random workload of
 * writes, trims, zeroes, flushes and reads over several NBD
 * connections, checked against a model of every 4 KiB block (model.h).
 * It proves that no acknowledged write is lost to a discard, whatever
 * the engine does with the trims in between.
 *
 *   verify --uri URI [--ops N | --seconds S] [--seed N] ...
 *   verify --uri URI --load-model FILE --verify-only
 *   verify --uri URI [--load-model FILE --verify-durable] --until-disconnect
 *          --save-model FILE ...      (the crash loop: tests/e2e/test-crash-restart.sh)
 *
 * Typical use (tests/e2e/test-verify-*.sh): run with --save-model, stop the
 * server (engine_stop forwards every pending discard), start it again
 * on the same backend, and check everything with --verify-only.
 *
 * Exit status: 0 all blocks as the model allows, 1 a mismatch or an
 * unexpected error (the seed and the first bad blocks' histories are
 * printed), 2 usage.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runcmd.h"
#include "verify.h"

/* Operations picked in a row before waiting for completions when the
 * picks keep landing on busy blocks.
 */
#define PICK_TRIES 8

static const char usage_text[] =
  "usage: verify --uri URI [options]\n"
  "  --connections N     NBD connections (4)\n"
  "  --depth N           commands in flight per connection (16)\n"
  "  --ops N             operations to issue (20000; 0 = until --seconds)\n"
  "  --seconds S         stop issuing after S seconds (0 = no limit)\n"
  "  --seed N            random seed (default: from the clock; printed)\n"
  "  --checkpoint N      read and check every block every N operations\n"
  "  --mix W,T,Z,F,R     weights of write, trim, zero, flush, read (40,30,12,3,15)\n"
  "  --max-blocks N      longest ordinary operation in 4 KiB blocks (16)\n"
  "  --unaligned PCT     trims cut at 512-byte sectors (10)\n"
  "  --fua PCT           commands with FUA (5)\n"
  "  --large-trims PCT   trims of 1-16 MiB (2)\n"
  "  --expect-errors     count errors instead of failing on them\n"
  "  --trim-zeroes       a completed trim must read as zeros, not as old data\n"
  "                      or zeros (a server that reads pending discards as\n"
  "                      zeros over a backend whose discard zeroes, with\n"
  "                      --unaligned 0): a trim skipped over data shows\n"
  "  --allow-enospc      count writes failing with ENOSPC (a full thin pool):\n"
  "                      their blocks may then hold their old data or\n"
  "                      the write's, sector by sector\n"
  "  --save-model FILE   save the model at the end\n"
  "  --load-model FILE   start from a saved model (and check it first)\n"
  "  --verify-only       only check the disk against the (loaded) model\n"
  "  --verify-durable    check the loaded model as after a crash of the server:\n"
  "                      each block holds its content as of the last completed\n"
  "                      flush (or FUA) or that of a later command; what was\n"
  "                      found becomes the model\n"
  "  --until-disconnect  the server may die (kill -9): then stop, count the\n"
  "                      commands it failed as maybe done, save the model, exit 0\n"
  "  --no-final-check    skip the full check at the end\n"
  "  --flush-cmd CMD     run CMD before each check and periodically\n"
  "  --ctl-cmd CMD       run CMD periodically (repeatable; run in turn)\n"
  "  --cmd-interval MS   period of those commands (500)\n"
  "  --progress S        print progress every S seconds\n";

static void
usage (int status)
{
  fputs (usage_text, status ? stderr : stdout);
  exit (status);
}

static uint64_t
parse_u64 (const char *opt, const char *s)
{
  char *end;
  unsigned long long n;

  errno = 0;
  n = strtoull (s, &end, 0);
  if (errno || end == s || *end || *s == '-') {
    fprintf (stderr, "verify: %s: not a number: %s\n", opt, s);
    exit (2);
  }
  return n;
}

static void
parse_mix (struct options *o, const char *s)
{
  static const enum op_type order[] = {
    OP_WRITE, OP_TRIM, OP_ZERO, OP_FLUSH, OP_READ,
  };
  unsigned w[5], total = 0;

  if (sscanf (s, "%u,%u,%u,%u,%u", &w[0], &w[1], &w[2], &w[3], &w[4]) != 5) {
    fprintf (stderr, "verify: --mix: expected five weights W,T,Z,F,R: %s\n", s);
    exit (2);
  }
  for (int i = 0; i < 5; i++) {
    o->weight[order[i]] = w[i];
    total += w[i];
  }
  if (total == 0) {
    fprintf (stderr, "verify: --mix: all weights are zero\n");
    exit (2);
  }
}

enum {
  O_URI = 256, O_CONNECTIONS, O_DEPTH, O_OPS, O_SECONDS, O_SEED,
  O_CHECKPOINT, O_MIX, O_MAX_BLOCKS, O_UNALIGNED, O_FUA, O_LARGE,
  O_EXPECT_ERRORS, O_ALLOW_ENOSPC, O_TRIM_ZEROES, O_SAVE, O_LOAD, O_VERIFY_ONLY,
  O_VERIFY_DURABLE, O_UNTIL_DISCONNECT,
  O_NO_FINAL, O_FLUSH_CMD, O_CTL_CMD, O_CMD_INTERVAL, O_PROGRESS,
};

static const struct option long_options[] = {
  { "uri", required_argument, NULL, O_URI },
  { "connections", required_argument, NULL, O_CONNECTIONS },
  { "depth", required_argument, NULL, O_DEPTH },
  { "ops", required_argument, NULL, O_OPS },
  { "seconds", required_argument, NULL, O_SECONDS },
  { "seed", required_argument, NULL, O_SEED },
  { "checkpoint", required_argument, NULL, O_CHECKPOINT },
  { "mix", required_argument, NULL, O_MIX },
  { "max-blocks", required_argument, NULL, O_MAX_BLOCKS },
  { "unaligned", required_argument, NULL, O_UNALIGNED },
  { "fua", required_argument, NULL, O_FUA },
  { "large-trims", required_argument, NULL, O_LARGE },
  { "expect-errors", no_argument, NULL, O_EXPECT_ERRORS },
  { "allow-enospc", no_argument, NULL, O_ALLOW_ENOSPC },
  { "trim-zeroes", no_argument, NULL, O_TRIM_ZEROES },
  { "save-model", required_argument, NULL, O_SAVE },
  { "load-model", required_argument, NULL, O_LOAD },
  { "verify-only", no_argument, NULL, O_VERIFY_ONLY },
  { "verify-durable", no_argument, NULL, O_VERIFY_DURABLE },
  { "until-disconnect", no_argument, NULL, O_UNTIL_DISCONNECT },
  { "no-final-check", no_argument, NULL, O_NO_FINAL },
  { "flush-cmd", required_argument, NULL, O_FLUSH_CMD },
  { "ctl-cmd", required_argument, NULL, O_CTL_CMD },
  { "cmd-interval", required_argument, NULL, O_CMD_INTERVAL },
  { "progress", required_argument, NULL, O_PROGRESS },
  { "help", no_argument, NULL, 'h' },
  { NULL, 0, NULL, 0 },
};

static void
set_defaults (struct options *o)
{
  *o = (struct options) {
    .connections = 4, .depth = 16, .ops = 20000, .max_blocks = 16,
    .unaligned_pct = 10, .fua_pct = 5, .large_trim_pct = 2,
    .cmd_interval_ms = 500, .seed = (uint64_t) time (NULL),
  };
  o->weight[OP_WRITE] = 40;
  o->weight[OP_TRIM] = 30;
  o->weight[OP_ZERO] = 12;
  o->weight[OP_FLUSH] = 3;
  o->weight[OP_READ] = 15;
}

static uint64_t
bounded (const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
  uint64_t n = parse_u64 (opt, s);

  if (n < lo || n > hi) {
    fprintf (stderr, "verify: %s: %" PRIu64 " is outside [%" PRIu64 ", %"
             PRIu64 "]\n", opt, n, lo, hi);
    exit (2);
  }
  return n;
}

static void
parse_options (struct options *o, int argc, char *argv[])
{
  int c;

  set_defaults (o);
  while ((c = getopt_long (argc, argv, "h", long_options, NULL)) != -1) {
    switch (c) {
    case O_URI: o->uri = optarg; break;
    case O_CONNECTIONS:
      o->connections = bounded ("--connections", optarg, 1, MAX_CONNECTIONS);
      break;
    case O_DEPTH: o->depth = bounded ("--depth", optarg, 1, 1024); break;
    case O_OPS: o->ops = parse_u64 ("--ops", optarg); break;
    case O_SECONDS: o->seconds = atof (optarg); break;
    case O_SEED: o->seed = parse_u64 ("--seed", optarg); break;
    case O_CHECKPOINT: o->checkpoint = parse_u64 ("--checkpoint", optarg); break;
    case O_MIX: parse_mix (o, optarg); break;
    case O_MAX_BLOCKS:
      o->max_blocks = bounded ("--max-blocks", optarg, 1, 4096);
      break;
    case O_UNALIGNED: o->unaligned_pct = bounded ("--unaligned", optarg, 0, 100); break;
    case O_FUA: o->fua_pct = bounded ("--fua", optarg, 0, 100); break;
    case O_LARGE: o->large_trim_pct = bounded ("--large-trims", optarg, 0, 100); break;
    case O_EXPECT_ERRORS: o->expect_errors = true; break;
    case O_ALLOW_ENOSPC: o->allow_enospc = true; break;
    case O_TRIM_ZEROES: o->trim_zeroes = true; break;
    case O_SAVE: o->save_model = optarg; break;
    case O_LOAD: o->load_model = optarg; break;
    case O_VERIFY_ONLY: o->verify_only = true; break;
    case O_VERIFY_DURABLE: o->verify_durable = true; break;
    case O_UNTIL_DISCONNECT: o->until_disconnect = true; break;
    case O_NO_FINAL: o->no_final_check = true; break;
    case O_FLUSH_CMD: o->flush_cmd = optarg; break;
    case O_CTL_CMD:
      if (o->nctl_cmds == sizeof o->ctl_cmds / sizeof o->ctl_cmds[0] - 1) {
        fprintf (stderr, "verify: too many --ctl-cmd\n");
        exit (2);
      }
      o->ctl_cmds[o->nctl_cmds++] = optarg;
      break;
    case O_CMD_INTERVAL:
      o->cmd_interval_ms = bounded ("--cmd-interval", optarg, 1, 3600000);
      break;
    case O_PROGRESS: o->progress = atof (optarg); break;
    case 'h': usage (0); break;
    default: usage (2);
    }
  }
  if (o->uri == NULL || optind != argc)
    usage (2);
  if (o->trim_zeroes && o->unaligned_pct) {
    fprintf (stderr, "verify: --trim-zeroes needs --unaligned 0 (a trim cut "
             "at sectors leaves old data in its head and tail blocks)\n");
    exit (2);
  }
  if ((o->verify_only || o->verify_durable) && o->load_model == NULL) {
    fprintf (stderr, "verify: --verify-only and --verify-durable need "
             "--load-model\n");
    exit (2);
  }
}

static double
now_s (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A full check, after the flush command if there is one. */
static int
checkpoint (struct verifier *v)
{
  if (io_drain (v) == -1)
    return -1;
  if (v->opt.flush_cmd && run_cmd (v->opt.flush_cmd) == -1)
    return -1;
  return io_check_all (v);
}

/* Issue until every connection is full or the picks keep landing on
 * busy blocks.
 */
static int
issue_some (struct verifier *v, uint64_t limit)
{
  unsigned misses = 0;

  while (io_has_room (v) && misses < PICK_TRIES &&
         (limit == 0 || v->issued < limit)) {
    struct op_choice ch;

    if (!workload_next (v, &ch)) {
      misses++;
      continue;
    }
    if (io_issue (v, &ch) == -1)
      return -1;
  }
  return 0;
}

static void
print_progress (struct verifier *v, double elapsed)
{
  fprintf (stderr, "verify: %.0f s: %" PRIu64 " operations, %" PRIu64
           " blocks checked, %" PRIu64 " mismatches\n",
           elapsed, v->issued, v->blocks_checked, v->mismatches);
}

static int
run_workload (struct verifier *v)
{
  const struct options *o = &v->opt;
  double start = now_s (), next_progress = o->progress;
  uint64_t next_checkpoint = o->checkpoint;

  while (!v->failed && !v->disconnected) {
    double elapsed = now_s () - start;

    if ((o->ops && v->issued >= o->ops) ||
        (o->seconds > 0 && elapsed >= o->seconds))
      break;
    if (o->checkpoint && v->issued >= next_checkpoint) {
      if (checkpoint (v) == -1)
        return -1;
      next_checkpoint += o->checkpoint;
      continue;
    }
    if (issue_some (v, o->ops ? o->ops : 0) == -1 ||
        io_poll (v, v->inflight ? 100 : 0) == -1)
      return -1;
    if (o->progress > 0 && elapsed >= next_progress) {
      print_progress (v, elapsed);
      next_progress += o->progress;
    }
  }
  return io_drain (v);
}

static void
print_errors (const struct verifier *v, FILE *fp)
{
  for (int t = 0; t < OP_TYPES; t++)
    for (int e = 1; e < ERRNO_SLOTS; e++)
      if (v->errors[t][e])
        fprintf (fp, "verify: %" PRIu64 " %s commands failed with %s\n",
                 v->errors[t][e], op_names[t], strerror (e));
}

static uint64_t
errors_of (const struct verifier *v, enum op_type t, int only_errno)
{
  uint64_t n = 0;

  for (int e = 1; e < ERRNO_SLOTS; e++)
    if (only_errno == 0 || e == only_errno)
      n += v->errors[t][e];
  return n;
}

/* One key=value line that test scripts read, then the verdict. */
static void
print_summary (const struct verifier *v, double seconds)
{
  print_errors (v, stderr);
  printf ("verify-result: seed=%" PRIu64 " ops=%" PRIu64 " writes=%" PRIu64
          " trims=%" PRIu64 " zeroes=%" PRIu64 " flushes=%" PRIu64
          " reads=%" PRIu64 " checked=%" PRIu64 " mismatches=%" PRIu64
          " disconnected=%d disconnect_errors=%" PRIu64
          " crash_anything=%" PRIu64 " unchecked=%" PRIu64,
          v->opt.seed, v->issued, v->count[OP_WRITE], v->count[OP_TRIM],
          v->count[OP_ZERO], v->count[OP_FLUSH], v->count[OP_READ],
          v->blocks_checked, v->mismatches, v->disconnected,
          v->disconnect_errors, v->crash_anything, v->unchecked);
  for (int t = 0; t < OP_TYPES; t++)
    if (t != OP_CHECK)
      printf (" %s_errors=%" PRIu64 " %s_eio=%" PRIu64, op_names[t],
              errors_of (v, t, 0), op_names[t], errors_of (v, t, EIO));
  printf (" write_enospc=%" PRIu64 " seconds=%.1f\n",
          errors_of (v, OP_WRITE, ENOSPC), seconds);
  if (v->failed)
    printf ("verify: FAILED (seed %" PRIu64 ")\n", v->opt.seed);
  fflush (stdout);
}

static int
setup_model (struct verifier *v)
{
  uint64_t size = io_size (v);

  if (size == 0 || size % BLOCK_SIZE) {
    fprintf (stderr, "verify: the disk size %" PRIu64 " is not a positive "
             "multiple of %d\n", size, BLOCK_SIZE);
    return -1;
  }
  if (v->opt.load_model == NULL) {
    if (model_init (&v->model, size / BLOCK_SIZE) == -1)
      return -1;
  }
  else if (model_load (&v->model, v->opt.load_model) == -1)
    return -1;
  else if (v->model.nblocks != size / BLOCK_SIZE) {
    fprintf (stderr, "verify: %s is a model of %" PRIu64 " blocks, the disk "
             "has %" PRIu64 "\n", v->opt.load_model, v->model.nblocks,
             size / BLOCK_SIZE);
    return -1;
  }
  v->model.trim_zeroes = v->opt.trim_zeroes;
  return 0;
}

/* The commands run beside the I/O: the flush command first. */
static struct cmd_runner *
start_commands (struct verifier *v, char **cmds)
{
  size_t n = 0;

  if (v->opt.flush_cmd)
    cmds[n++] = (char *) v->opt.flush_cmd;
  for (unsigned i = 0; i < v->opt.nctl_cmds; i++)
    cmds[n++] = v->opt.ctl_cmds[i];
  return n ? cmd_runner_start (cmds, n, v->opt.cmd_interval_ms) : NULL;
}

static int
stop_commands (struct verifier *v, struct cmd_runner *r)
{
  unsigned runs, failures = cmd_runner_stop (r, &runs);

  if (runs)
    fprintf (stderr, "verify: commands beside the I/O: %u runs, %u failed\n",
             runs, failures);
  /* Once the server is gone, its control socket is too. */
  return failures && !v->disconnected ? -1 : 0;
}

/* Check what a previous run left, then (unless only checking) run the
 * workload, and check everything at the end.
 */
static int
run (struct verifier *v)
{
  char *cmds[17];
  struct cmd_runner *runner;
  int r = 0;

  if (v->opt.load_model) {
    v->crash_check = v->opt.verify_durable;
    if (io_check_all (v) == -1)
      return -1;
    v->crash_check = false;
    /* Cut short by another crash, the blocks checked so far hold what
     * was found and the others are as they were: checked next time.
     */
    if (v->opt.verify_durable && !v->disconnected)
      model_all_durable (&v->model);
    if (v->opt.verify_only || v->failed || v->disconnected)
      goto save;
  }
  /* The crash loop's script kills the server after this line. */
  printf ("verify: running\n");
  fflush (stdout);
  runner = start_commands (v, cmds);
  if (run_workload (v) == -1)
    r = -1;
  if (stop_commands (v, runner) == -1)
    v->failed = true;
  if (r == 0 && !v->failed && !v->disconnected && !v->opt.no_final_check)
    r = checkpoint (v);
  if (v->disconnected)
    printf ("verify: the server went away after %" PRIu64 " operations\n",
            v->issued);
 save:
  if (v->opt.save_model && model_save (&v->model, v->opt.save_model) == -1)
    r = -1;
  return r;
}

int
main (int argc, char *argv[])
{
  static struct verifier v;
  double start;
  int r;

  parse_options (&v.opt, argc, argv);
  v.rng = v.opt.seed;
  if (io_connect (&v) == -1 || setup_model (&v) == -1)
    exit (1);
  printf ("verify: seed %" PRIu64 ", %" PRIu64 " blocks of %d bytes, %u "
          "connections x %u in flight\n", v.opt.seed, v.model.nblocks,
          BLOCK_SIZE, v.nconns, v.opt.depth);
  fflush (stdout);
  start = now_s ();
  r = run (&v);
  if (r == -1)
    v.failed = true;
  print_summary (&v, now_s () - start);
  io_disconnect (&v);
  model_free (&v.model);
  return v.failed ? 1 : 0;
}
