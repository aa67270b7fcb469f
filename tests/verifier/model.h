/* discardcache verifier: the model of what every 4 KiB block of the
 * disk may contain, and the patterns written into them.
 *
 * A block is in one of three states:
 *   DATA v   it holds pattern (block, v); v = 0 is the zero block
 *            (never written, or zeroed);
 *   + may_zero: it was trimmed since: each 512-byte sector holds the
 *            pattern or zeros (the NBD protocol leaves trimmed content
 *            undefined; both of our backends give the old data or
 *            zeros, never anything else);
 *   UNKNOWN  a write or zero to it failed: anything goes until the
 *            next successful write or zero.
 *
 * The caller never has two operations on one block in flight (blocks
 * are busy from issue to completion), so a state changes only when an
 * operation completes, and the order of completions is the order of
 * effects.
 *
 * For a crash loop (the state file issue), each block also remembers
 * the completion sequence number of its last change; a block changed
 * before a flush was issued, whose flush completed, is "durable".
 */
#ifndef DISCARDCACHE_VERIFY_MODEL_H
#define DISCARDCACHE_VERIFY_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define BLOCK_SIZE 4096
#define SECTOR_SIZE 512
#define HISTORY 6               /* operations remembered per block */

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

struct blk {
  uint32_t version;             /* DATA: the pattern version, 0 = zeros */
  uint32_t next_version;        /* last version handed out */
  uint8_t kind;                 /* enum blk_kind */
  bool may_zero;                /* trimmed since the last write */
  bool busy;                    /* an operation on it is in flight */
  uint8_t nhist;                /* events in hist[], at most HISTORY */
  uint64_t changed_seq;         /* completion number of its last change */
  struct blk_event hist[HISTORY]; /* ring, hist[(nhist-1) % HISTORY] newest */
};

struct model {
  uint64_t nblocks;
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
 * only_durable skips blocks changed after the last completed flush.
 */
extern bool model_check_block (const struct model *m, uint64_t block,
                               const void *buf, bool only_durable, FILE *fp);

/* After a crash check (only durable blocks checked), the others may
 * hold any of their past contents: they become UNKNOWN until written.
 */
extern void model_forget_volatile (struct model *m);

/* Save and load the model (the blocks' states only), so a later run
 * (after a restart of the server) can check the disk.
 */
extern int model_save (const struct model *m, const char *path);
extern int model_load (struct model *m, const char *path);

#endif /* DISCARDCACHE_VERIFY_MODEL_H */
