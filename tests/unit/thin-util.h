/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: what the thin-mode unit tests (tests/unit/test-thin-*.c)
 * share: the geometry, the volume under test and helpers around it
 * (thin-util.c).  Each test runs between thin_setup and thin_teardown.
 */
#ifndef DISCARDCACHE_THIN_UTIL_H
#define DISCARDCACHE_THIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "mem-backend.h"
#include "volume.h"

#define KiB 1024
#define SLOT (64 * KiB)
#define NPHYS 16
#define DISK (NPHYS * SLOT)

extern char meta[300];                 /* meta= in the scratch directory */
extern struct mem_backend *mem;        /* the backend */
extern struct volume *vol;             /* the thin volume under test */
extern struct engine *eng;             /* below it */
/* reserve= of the next volume opened: "0" (every freed run goes to the
 * engine, as before reserve= existed) unless a test sets it; NULL: the
 * default.
 */
extern const char *reserve_key;

/* A scratch directory for meta=; at the end, the volume closed and the
 * directory removed.
 */
extern int thin_setup (void **state);
extern int thin_teardown (void **state);

/* The thin volume, then the engine below it. */
extern void close_thin (void);

/* A thin volume over an engine over backend m (a new one if NULL),
 * with a delay that keeps discards pending.  Sets eng; NULL (and eng
 * NULL) when the volume is refused.
 */
extern struct volume *open_thin_on (struct mem_backend *m, const char *slot,
                                    const char *size);

/* vol: slots of 64 KiB, the exported size twice the backend's. */
extern void open_thin (void);

/* A backend full of non-zero bytes, as a used disk. */
extern struct mem_backend *used_backend (uint64_t size);

extern struct volume_stats stats (void);

/* Write length bytes of byte at offset; check they read back. */
extern void fill (uint64_t offset, uint32_t length, int byte);
extern void assert_filled (uint64_t offset, uint32_t length, int byte);

/* The physical slot logical slot l maps to, or -1. */
extern int64_t phys_of (uint64_t l);

/* A whole file (freed by the caller), and a file written whole. */
extern unsigned char *read_file (const char *path, size_t *len);
extern void write_file (const char *path, const void *p, size_t len);

/* What a kill -9 leaves: close this volume, put back meta image img
 * (freed) and start again on copy, the backend as it was then.
 */
extern void reopen_after_crash (struct mem_backend *copy, unsigned char *img,
                                size_t len);

/* A clean stop and a start again, on the backend as the stop left it. */
extern void restart (void);

#endif /* DISCARDCACHE_THIN_UTIL_H */
