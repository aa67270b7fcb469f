/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache verifier: the state shared by its parts.
 *
 *   verify.c    options, the phases of a run, the summary
 *   workload.c  which operation comes next (random, seeded, with
 *               locality so that writes land on fresh trims)
 *   io.c        connections, asynchronous commands, completions
 *   model.c     what each block may contain
 *   runcmd.c    shell commands beside the I/O
 *
 * One thread does all the I/O (libnbd's aio API over every connection,
 * one poll loop), so the model needs no lock.
 */
#ifndef DISCARDCACHE_VERIFY_H
#define DISCARDCACHE_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "model.h"

#define MAX_CONNECTIONS 16
#define RECENT 64               /* recent ranges remembered for locality */
#define ERRNO_SLOTS 160         /* errnos counted one by one; above: last */

struct options {
  const char *uri;
  unsigned connections;         /* NBD connections */
  unsigned depth;               /* commands in flight per connection */
  uint64_t ops;                 /* operations to issue (0: no limit) */
  double seconds;               /* run time (0: no limit) */
  uint64_t seed;
  uint64_t checkpoint;          /* full check every N operations (0: none) */
  unsigned weight[OP_TYPES];    /* mix of write, trim, zero, flush, read */
  unsigned max_blocks;          /* longest ordinary operation, in blocks */
  unsigned unaligned_pct;       /* trims cut at sectors, not blocks */
  unsigned fua_pct;
  unsigned large_trim_pct;      /* trims of 1-16 MiB */
  bool expect_errors;           /* errors are counted, not failures */
  bool allow_enospc;            /* writes may fail with ENOSPC (thin mode) */
  bool trim_zeroes;             /* a completed trim reads as zeros */
  bool verify_only;             /* no operations: check the disk */
  bool verify_durable;          /* check the loaded model as after a crash */
  bool until_disconnect;        /* the server may die: stop, save the model */
  bool no_final_check;
  const char *save_model;
  const char *load_model;
  const char *flush_cmd;        /* run at checkpoints and periodically */
  char *ctl_cmds[16];           /* run periodically, in turn */
  unsigned nctl_cmds;
  unsigned cmd_interval_ms;
  double progress;              /* print progress every N seconds */
};

struct range {
  uint64_t first, n;            /* blocks */
};

struct verifier {
  struct options opt;
  struct model model;
  uint64_t rng;

  struct conn *conns;
  unsigned nconns;
  unsigned inflight;            /* commands in flight, all connections */
  unsigned next_conn;           /* round robin */

  uint64_t issued;              /* operations issued (not checks) */
  uint64_t count[OP_TYPES];     /* completed, by type */
  uint64_t errors[OP_TYPES][ERRNO_SLOTS]; /* failed, by type and errno */
  uint64_t blocks_checked;
  uint64_t mismatches;
  bool failed;                  /* stop issuing: mismatch or fatal error */
  bool crash_check;             /* checks now: as after a crash, then adopt */
  bool disconnected;            /* the server went away (until_disconnect) */
  uint64_t disconnect_errors;   /* commands failed by it */
  uint64_t crash_anything;      /* blocks a crash check let hold anything */
  uint64_t unchecked;           /* block reads (not crash checks) that
                                   allowed anything */

  struct range recent_writes[RECENT], recent_trims[RECENT];
  unsigned nrecent_writes, nrecent_trims;
};

/* One operation chosen by the workload. */
struct op_choice {
  enum op_type type;
  uint64_t offset, length;      /* bytes (trims may be cut at sectors) */
  uint32_t flags;               /* LIBNBD_CMD_FLAG_* */
};

/* workload.c */
extern uint64_t rng_next (struct verifier *v);
extern uint64_t rng_below (struct verifier *v, uint64_t n);
/* Choose the next operation, on blocks that are not busy.  False if
 * the ranges tried were busy (try again after some completions).
 */
extern bool workload_next (struct verifier *v, struct op_choice *op);
/* Remember a completed range, so later operations can land on it. */
extern void workload_note (struct verifier *v, enum op_type type,
                           uint64_t first, uint64_t n);

/* io.c */
extern int io_connect (struct verifier *v);
extern void io_disconnect (struct verifier *v);
extern uint64_t io_size (struct verifier *v);
/* Whether another command may be issued now (a connection has room). */
extern bool io_has_room (struct verifier *v);
/* Issue op on the next connection with room; -1 on a fatal error. */
extern int io_issue (struct verifier *v, const struct op_choice *op);
/* Wait up to timeout_ms for events and process completions. */
extern int io_poll (struct verifier *v, int timeout_ms);
/* Wait until nothing is in flight. */
extern int io_drain (struct verifier *v);
/* Read every block and check it against the model. */
extern int io_check_all (struct verifier *v);

#endif /* DISCARDCACHE_VERIFY_H */
