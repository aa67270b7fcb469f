/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: hooks into the engine for its unit tests, and for
 * nothing else: a virtual clock, and the flusher's decision stepped
 * without its thread, so that liveness (invariant 8) can be checked
 * over hours of simulated time in milliseconds of real time; and a
 * hook in the journal's commits, to act while one runs.
 */
#ifndef DISCARDCACHE_ENGINE_TEST_H
#define DISCARDCACHE_ENGINE_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

/* A monotonic clock in nanoseconds. */
typedef uint64_t engine_clock_fn (void *opaque);

/* Read time from fn from now on (the default is CLOCK_MONOTONIC).  Call
 * right after engine_open, with nothing pending and the flusher thread
 * not started: the engine's epoch, idle and pacing state restart at the
 * new clock's now.  The thread's waits are real time, so a test on a
 * virtual clock steps the flusher with engine_flusher_step instead.
 */
extern void engine_test_set_clock (struct engine *e, engine_clock_fn *fn,
                                   void *opaque);

/* Returned by engine_flusher_step when nothing can happen without new
 * input (the thread then sleeps until signalled).
 */
#define ENGINE_FLUSHER_IDLE UINT64_MAX

/* Set the space-pressure state by hand, as low-water= sets it from the
 * backend's free space (use without low-water=, whose next look would
 * set it again): while set, windows do not hold the flusher and thin
 * mode's reserve counts as 0 (invariant 11: pressure only forwards
 * sooner).
 */
extern void engine_set_pressure (struct engine *e, bool pressure);

/* One turn of the flusher, as its thread takes it: forward one range,
 * or decide when to look again.  Returns the clock time (ns) of the
 * next turn: at most now when it forwarded (or completed a flush), or
 * ENGINE_FLUSHER_IDLE.
 */
extern uint64_t engine_flusher_step (struct engine *e);

/* Called by each commit of the journal once it has taken the records
 * and dropped the journal's lock, before it writes them (sync: the
 * commit syncs the journal itself; otherwise a FLUSH writes the records
 * out for the backend's flush).  Set before engine_start; NULL stops.
 * A test's way to act while a commit is under way.
 */
typedef void engine_journal_hook_fn (void *opaque, bool sync);
extern void engine_test_set_journal_hook (struct engine *e,
                                          engine_journal_hook_fn *fn,
                                          void *opaque);

#endif /* DISCARDCACHE_ENGINE_TEST_H */
