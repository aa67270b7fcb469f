/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode (thin=on).  The exported disk is cut into
 * logical slots of slot= bytes, each unmapped (reads as zeros) or mapped
 * to one physical slot of the backend.  Three concerns, one file each:
 *
 *   thin-map.c      the slot table and the allocator, in memory, no I/O
 *                   and no locks (the caller holds the thin lock);
 *   thin-journal.c  the meta file: a header and a zstd-compressed
 *                   checkpoint of the map, then journal records;
 *   thin.c          the engine glue: each request is cut per slot and
 *                   sent to the identity-mode engine at the physical
 *                   address, and the journal is committed at FLUSH/FUA.
 *
 * Physical slot life cycle:
 *   CLEAN -> INIT (allocated, its first write in progress) -> MAPPED
 *   MAPPED -> UNMAPPING (a TRIM or zero unmapped it; its discard is being
 *   recorded) -> UNDURABLE (the discard is recorded; the unmap is not in
 *   the journal on disk yet) -> FREED (on the LIFO of reusable slots).
 * Only CLEAN and FREED slots are allocatable: a slot whose unmap could
 * still be undone by a crash is never handed to another logical slot.
 */
#ifndef DISCARDCACHE_THIN_H
#define DISCARDCACHE_THIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define THIN_UNMAPPED UINT32_MAX

enum thin_pstate {
  THIN_CLEAN,                  /* never used since the map was loaded */
  THIN_INIT,                   /* allocated, first write in progress */
  THIN_MAPPED,
  THIN_UNMAPPING,              /* unmapped, discard not recorded yet */
  THIN_UNDURABLE,              /* unmapped, unmap not durable yet */
  THIN_FREED,                  /* on the LIFO, allocatable */
};

/* An unmap waiting for its journal record to become durable. */
struct thin_undurable {
  uint64_t seq;                /* its record's sequence number */
  uint32_t phys;
};

struct thin_map {
  uint64_t nlogical;
  uint32_t nphys;
  uint32_t *l2p;               /* logical -> physical or THIN_UNMAPPED */
  uint32_t *p2l;               /* physical -> logical (valid when mapped) */
  uint8_t *pstate;             /* enum thin_pstate per physical slot */
  uint32_t *pins;              /* requests doing I/O on the slot now */
  uint32_t *freed;             /* LIFO: freed[nfreed-1] is reused first */
  uint32_t nfreed;
  uint32_t next_clean;         /* slots from here on are CLEAN */
  struct thin_undurable *undurable; /* in sequence order */
  uint32_t nundurable;
  size_t capundurable;
  uint64_t mapped;             /* MAPPED or INIT slots */
};

/* --- thin-map.c --- */

/* An empty map (every logical slot unmapped, every physical slot
 * clean).  0, or -1 with errno (ENOMEM reported).
 */
extern int thin_map_init (struct thin_map *m, uint64_t nlogical,
                          uint32_t nphys);
extern void thin_map_free (struct thin_map *m);

/* Take a slot for logical slot l (unmapped): the most recently freed,
 * else the lowest clean one; it becomes INIT.  Returns the physical
 * slot, or THIN_UNMAPPED when none is allocatable.  *reused tells
 * whether it came from the freed LIFO.
 */
extern uint32_t thin_map_alloc (struct thin_map *m, uint64_t l, bool *reused);

/* The first write of an INIT slot succeeded: it is MAPPED. */
extern void thin_map_mapped (struct thin_map *m, uint32_t p);

/* The first write of an INIT slot failed: unmap it; it is reusable at
 * once (it was never durable) and is zero-filled again on allocation.
 */
extern void thin_map_abort (struct thin_map *m, uint32_t p);

/* Room for one more unmap, so that the unmap itself cannot fail.  0,
 * or -1 with errno ENOMEM (reported).
 */
extern int thin_map_reserve_unmap (struct thin_map *m);

/* Unmap logical slot l (MAPPED, no pins; room reserved) under journal
 * record seq; its slot becomes UNMAPPING.  Returns the physical slot.
 */
extern uint32_t thin_map_unmap (struct thin_map *m, uint64_t l, uint64_t seq);

/* The discard of an UNMAPPING slot is recorded: it is UNDURABLE. */
extern void thin_map_unmapped (struct thin_map *m, uint32_t p);

/* Records up to seq are durable: UNDURABLE slots unmapped by them join
 * the freed LIFO in the order they were unmapped.  Returns how many.
 */
extern uint32_t thin_map_commit (struct thin_map *m, uint64_t seq);

/* Slots that a commit could make allocatable (UNMAPPING or UNDURABLE). */
extern uint32_t thin_map_pending_free (const struct thin_map *m);

/* Replay one journal record on a map being recovered (every slot
 * MAPPED, FREED or CLEAN).  -1 if it contradicts the map (mapping a
 * mapped slot, unmapping what is not so mapped, out of range).
 */
extern int thin_map_replay_map (struct thin_map *m, uint64_t l, uint32_t p);
extern int thin_map_replay_unmap (struct thin_map *m, uint64_t l, uint32_t p);

/* The replay is over: rebuild the freed LIFO from the slots' states. */
extern void thin_map_replay_done (struct thin_map *m);

/* Load l2p (nlogical entries) as the whole map, with slots below
 * high_water that are not mapped FREED and the others CLEAN.  -1 if an
 * entry is out of range or a physical slot is mapped twice.
 */
extern int thin_map_load (struct thin_map *m, const uint32_t *l2p,
                          uint32_t high_water);

/* --- thin-journal.c: the meta file --- */

/* Layout (integers little-endian):
 *   header, THIN_HEADER_SIZE bytes:
 *     0 magic "DCTHIN\0\0"   8 version (u32)     12 header size (u32)
 *    16 slot size (u64)     24 exported size    32 backend size
 *    40 kind (char[8])      48 dev (u64)        56 inode (u64)
 *    64 next sequence number (u64)              72 high water (u32)
 *    76 checkpoint raw size (u32 slots)         80 compressed size (u64)
 *    88 unix time of the checkpoint (u64)       96 CRC-32C of the header
 *       (this field as 0), the name and the payload (u32)
 *   100 name length (u32), 104 the backend's name (no NUL)
 *   payload: one zstd frame of the map, one u32 per logical slot
 *   then journal records of THIN_RECORD_SIZE bytes:
 *     0 type (u32: 1 map, 2 unmap)   4 physical slot (u32)
 *     8 sequence number (u64)       16 logical slot (u32)
 *    20 CRC-32C of bytes 0-19 (u32)
 */
#define THIN_VERSION 1
#define THIN_HEADER_SIZE 104
#define THIN_RECORD_SIZE 24

enum thin_record_type { THIN_REC_MAP = 1, THIN_REC_UNMAP = 2 };

struct thin_record {
  uint32_t type;
  uint32_t phys;
  uint64_t seq;
  uint32_t logical;
};

/* What a meta file belongs to. */
struct thin_meta_id {
  uint64_t slot;
  uint64_t size;               /* exported size */
  uint64_t backend_size;
  struct backend_identity backend;
};

extern void thin_record_encode (const struct thin_record *r,
                                unsigned char out[THIN_RECORD_SIZE]);
/* 0, or -1 if the checksum or the type is wrong. */
extern int thin_record_decode (const unsigned char in[THIN_RECORD_SIZE],
                               struct thin_record *r);

/* A checkpoint image of l2p (nlogical entries) for id: malloc'd into
 * *image, *len bytes.  0, or -1 with errno reported.
 */
extern int thin_checkpoint_encode (const struct thin_meta_id *id,
                                   const uint32_t *l2p, uint64_t nlogical,
                                   uint64_t next_seq, uint32_t high_water,
                                   uint64_t time, void **image, size_t *len);

/* What recovery found. */
struct thin_recovery {
  uint64_t next_seq;           /* the next record's sequence number */
  size_t valid_len;            /* bytes up to the last good record */
  uint64_t records;            /* replayed */
  uint64_t checkpoint_time;
  size_t checkpoint_len;       /* header + name + payload */
};

/* Rebuild m (initialised to the right size) from a meta file image:
 * the checkpoint, then every record in sequence; a torn or corrupt tail
 * ends the replay (valid_len tells where).  -1 with the reason in why
 * when the image belongs to something else, its checkpoint is corrupt,
 * or a record with a good checksum contradicts the map.
 */
extern int thin_meta_recover (const void *image, size_t len,
                              const struct thin_meta_id *id,
                              struct thin_map *m, struct thin_recovery *rec,
                              char *why, size_t whylen);

#endif /* DISCARDCACHE_THIN_H */
