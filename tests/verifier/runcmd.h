/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache verifier: shell commands run beside the I/O, such as
 * `discardctl flush --wait` (--flush-cmd) or `discardctl pause`
 * (--ctl-cmd), from a thread of their own so the I/O never stops for
 * them.
 */
#ifndef DISCARDCACHE_VERIFY_RUNCMD_H
#define DISCARDCACHE_VERIFY_RUNCMD_H

#include <stddef.h>

struct cmd_runner;

/* Run cmd with /bin/sh now.  Returns 0, or -1 (reported) if it could not
 * run or did not exit with status 0.
 */
extern int run_cmd (const char *cmd);

/* Start a thread that runs cmds[0..n) in turn, one every interval_ms,
 * until stopped.  The array must outlive the runner.  NULL on error.
 */
extern struct cmd_runner *cmd_runner_start (char *const *cmds, size_t n,
                                            unsigned interval_ms);

/* Stop and join the thread; returns how many runs failed and stores
 * how many ran in *runs.  NULL is allowed (returns 0).
 */
extern unsigned cmd_runner_stop (struct cmd_runner *r, unsigned *runs);

#endif /* DISCARDCACHE_VERIFY_RUNCMD_H */
