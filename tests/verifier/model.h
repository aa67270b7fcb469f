/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache verifier: the model of what every 4 KiB block of the
 * disk may contain, and the patterns written into them.
 *
 * A block is in one of these states:
 *   DATA v   it holds pattern (block, v); v = 0 is the zero block
 *            (never written, or zeroed);
 *   + may_zero: it was trimmed since, or a zero of it failed, or a
 *            write to the zero block failed: each
 *            512-byte sector holds the pattern or zeros (the NBD
 *            protocol leaves trimmed content undefined; both of our
 *            backends give the old data or zeros, never anything else);
 *   + alt[]: writes to it failed (a full thin pool, a backend error):
 *            each sector may also hold one of those writes' patterns,
 *            since a failed write may have done part, but nothing else
 *            (no other block's data, no garbage);
 *   UNKNOWN  about ALT_VERSIONS writes to it failed in a row (the
 *            first from the zero block becomes v), or a crash check
 *            found data that is no pattern of ours: anything goes until
 *            the next successful write or zero.
 * A crash check that finds a block torn between versions (a write that
 * landed in part) adopts it as allowing each of them per sector.
 *
 * The caller never has two operations on one block in flight (blocks
 * are busy from issue to completion), so a state changes only when an
 * operation completes, and the order of completions is the order of
 * effects.
 *
 * With trim_zeroes (the server reads pending discards as zeros and its
 * backend's discard zeroes, whole blocks only), a completed trim leaves
 * DATA 0 instead: a TRIM the server skipped over data it believed
 * discarded (invariant 9) then shows as a mismatch.  A write that fails
 * after it allows the content from before the trim again: its cancel
 * may have reached the journal's file while the write never landed, and
 * a crash then keeps neither (invariant 10).
 *
 * For the crash loop (kill -9 of the server), each block also keeps
 * its durable state, the state as of the last completed flush (a change
 * completed before the flush was issued is durable once the flush
 * completes; so is a completed FUA command), and the operations after
 * it, completed or failed: after a crash, each sector may hold the
 * durable content or the content of any of those operations (a trim
 * or zero among them allows zeros).  A failed command is one that may
 * or may not have run: a server killed with commands in flight fails
 * them all.
 */
#ifndef DISCARDCACHE_VERIFY_MODEL_H
#define DISCARDCACHE_VERIFY_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define BLOCK_SIZE 4096
#define SECTOR_SIZE 512
#define HISTORY 6               /* operations remembered per block */
#define AFTER_DURABLE 8         /* operations kept after the durable state */
#define ALT_VERSIONS 16         /* failed writes remembered per block */

enum op_type { OP_WRITE, OP_TRIM, OP_ZERO, OP_FLUSH, OP_READ, OP_CHECK,
               OP_TYPES };

enum blk_kind { BLK_DATA, BLK_UNKNOWN };

struct blk_event {
  uint64_t seq;                 /* completion number */
  uint32_t version;             /* the write's version (writes) */
  uint8_t type;                 /* enum op_type */
  uint8_t fua;
  int16_t err;                  /* 0 or the errno it completed with */
};

/* What a block may hold (the states above). */
struct blk_state {
  uint32_t version;             /* DATA: the pattern version, 0 = zeros */
  uint8_t kind;                 /* enum blk_kind */
  bool may_zero;                /* zeros allowed too */
  uint32_t alt[ALT_VERSIONS];   /* more versions allowed, 0 = none */
  /* trim_zeroes: the version a trim left zeros over (0: none).  A write
   * that fails after it may have cancelled the trim in the journal's
   * file without landing (invariant 10's crash of the server alone), so
   * it allows this again with its own.
   */
  uint32_t before_trim;
};

struct blk {
  struct blk_state cur;         /* as of the last completion */
  uint32_t next_version;        /* last version handed out */
  bool busy;                    /* an operation on it is in flight */
  uint8_t nhist;                /* events in hist[], at most HISTORY */
  uint64_t changed_seq;         /* completion number of its last change */
  struct blk_event hist[HISTORY]; /* ring, hist[(nhist-1) % HISTORY] newest */
  /* The durable state ... */
  struct blk_state dur;
  /* ... and the changes since, oldest first; after too many of them
   * the block may hold anything after a crash.
   */
  bool after_overflow;
  uint8_t nafter;
  struct blk_event after[AFTER_DURABLE];
};

struct model {
  uint64_t nblocks;
  bool trim_zeroes;             /* a trim leaves zeros, not old-or-zeros */
  struct blk *blk;
  uint64_t seq;                 /* completions so far */
  uint64_t durable_seq;         /* changes before this are flushed */
};

extern const char *const op_names[OP_TYPES];

/* Allocate a model of nblocks zero blocks (the disk starts sparse). */
extern int model_init (struct model *m, uint64_t nblocks);
extern void model_free (struct model *m);

/* Fill buf (BLOCK_SIZE bytes) with the pattern of (block, version). */
extern void pattern_fill (void *buf, uint64_t block, uint32_t version);

/* Record the completion of an operation of type on [first, first+n)
 * (writes carry their versions in versions[]; err is 0 or an errno)
 * and apply it to the state.
 */
extern void model_complete (struct model *m, enum op_type type,
                            uint64_t first, uint64_t n,
                            const uint32_t *versions, bool fua, int err);

/* A flush issued at completion count issued_at has completed. */
extern void model_flushed (struct model *m, uint64_t issued_at);

/* Check one block's content.  Returns true if it is allowed; otherwise
 * describes the mismatch (what was found, the block's history) on fp
 * unless fp is NULL.
 * after_crash: check against what may be there after a crash of the
 * server (the durable state or any change since, see above).
 */
extern bool model_check_block (const struct model *m, uint64_t block,
                               const void *buf, bool after_crash, FILE *fp);

/* Whether a check of the block can fail at all: false if it may hold
 * anything (UNKNOWN, or after a crash too many changes since it was
 * durable).
 */
extern bool model_checkable (const struct model *m, uint64_t block,
                             bool after_crash);

/* After a crash check, the block holds what was found: that becomes
 * its state (UNKNOWN if its sectors hold different versions), durable.
 */
extern void model_adopt_block (struct model *m, uint64_t block,
                               const void *buf);

/* Once every block is adopted: all of it is the durable state. */
extern void model_all_durable (struct model *m);

/* Save and load the model (the blocks' states only), so a later run
 * (after a restart of the server) can check the disk.
 */
extern int model_save (const struct model *m, const char *path);
extern int model_load (struct model *m, const char *path);

#endif /* DISCARDCACHE_VERIFY_MODEL_H */
