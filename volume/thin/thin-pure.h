/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: thin mode (thin=on), its pure parts.  The exported disk
 * is cut into logical slots of slot= bytes; runs of logical slots are
 * mapped to runs of physical slots of the backend.  Nothing here does
 * I/O or locking (thin.c and thin-meta.c do, holding the thin lock), so
 * the unit tests and the fuzz target drive these directly:
 *
 *   thin-map.c      the map: logical runs -> physical runs, on the
 *                   extent map's B+tree (extmap_new_runs), and the
 *                   checks recovery makes against the free set;
 *   thin-space.c    free physical slots and the allocator's queries:
 *                   freed slots kept in the reuse reserve and those
 *                   whose discard may be pending (each best fit by run
 *                   length, then most recently freed), clean ones, and
 *                   which of those are known to read as zeros;
 *   thin-journal.c  the meta file's format: a checkpoint of runs, then
 *                   journal records, each describing a run;
 *   thin-meta-v1.c  format version 1 (one entry per logical slot),
 *                   read to convert it;
 *   thin-recover.c  which of those readers an image needs.
 *
 * The rest of thin mode (thin.c, the data path; thin-meta.c, the
 * commit; thin-alloc.c, thin-reserve.c, thin-open.c) holds the thin
 * lock and is described in thin-internal.h.
 *
 * Memory follows the number of runs, never the exported or backend
 * size.  See docs/design-notes.md, "Thin mode".
 */
#ifndef DISCARDCACHE_THIN_PURE_H
#define DISCARDCACHE_THIN_PURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "extmap.h"

/* Physical slots are 32-bit (the run map's value column): at most this
 * many in the pool.
 */
#define THIN_MAX_PHYS UINT32_MAX

/* --- thin-map.c: the map of runs --- */

struct thin_map {
  struct extmap *runs;         /* logical slot -> physical slot (the
                                  extent's value: where it starts) */
  uint64_t nlogical;           /* logical slots (the last may be short) */
  uint64_t nphys;              /* physical slots */
  uint64_t mapped;             /* slots mapped */
};

/* An empty map.  0, or -1 with errno ENOMEM (reported). */
extern int thin_map_init (struct thin_map *m, uint64_t nlogical,
                          uint64_t nphys);
extern void thin_map_free (struct thin_map *m);

/* What logical slot l starts: a mapped run (true; *p its physical slot,
 * *n how many slots from l on continue it) or a gap (false; *n slots up
 * to the next mapped one), *n at most max.
 */
extern bool thin_map_lookup (const struct thin_map *m, uint64_t l,
                             uint64_t max, uint32_t *p, uint64_t *n);

/* Map [l, l+n) (unmapped) to [p, p+n).  0, or -1 with errno (EINVAL:
 * out of range or already mapped; ENOMEM).  Nothing changes on error.
 */
extern int thin_map_add (struct thin_map *m, uint64_t l, uint64_t n,
                         uint32_t p);

/* Unmap [l, l+n), one mapped run's part.  0, or -1 with errno ENOMEM
 * (splitting a run needs a node); nothing changes on error.
 */
extern int thin_map_remove (struct thin_map *m, uint64_t l, uint64_t n);

/* Bytes the map holds, and its runs. */
extern size_t thin_map_memory (const struct thin_map *m);
extern uint64_t thin_map_runs (const struct thin_map *m);

/* Recovery.  The free set is every physical slot no run maps, a plain
 * extent map of slot ranges; each replayed record is checked against
 * the map and the free set together, so no per-slot table is needed.
 */

/* The free set of m: NULL and errno EINVAL if two runs share a
 * physical slot (or ENOMEM).
 */
extern struct extmap *thin_map_free_set (const struct thin_map *m);

/* A MAP record: [l, l+n) must be unmapped and [p, p+n) free.  An UNMAP
 * record: [l, l+n) must be mapped to [p, p+n).  0, or -1 (EINVAL for a
 * contradiction, ENOMEM); after -1 the recovery is abandoned, m and
 * free are only good for freeing.
 */
extern int thin_map_replay_map (struct thin_map *m, struct extmap *free_set,
                                uint64_t l, uint64_t n, uint32_t p);
extern int thin_map_replay_unmap (struct thin_map *m, struct extmap *free_set,
                                  uint64_t l, uint64_t n, uint32_t p);

/* --- thin-space.c: free physical slots --- */

/* Freed runs ordered for best fit (see thin-space.c). */
struct thin_freed {
  struct extmap *runs;         /* time: when freed, a sequence number,
                                  merged runs take the newest */
  struct extmap *index;        /* the runs by length class, most
                                  recently freed first */
  uint32_t next_seq;           /* the next free sequence number */
  uint32_t seq_limit;          /* renumber when next_seq reaches it */
};

struct thin_space {
  struct thin_freed reserve;   /* freed, kept from the device for reuse
                                  (reserve=, invariant 12) */
  struct thin_freed pending;   /* freed; their discard may still be
                                  pending in the engine */
  struct extmap *clean;        /* free with nothing to discard */
  struct extmap *zero;         /* ... and known to read as zeros */
  uint64_t lost;               /* slots dropped for want of memory */
};

/* Which set a free slot is in. */
enum thin_free_kind {
  THIN_NOT_FREE = 0, THIN_PENDING, THIN_CLEAN, THIN_ZERO, THIN_RESERVE,
};

extern int thin_space_init (struct thin_space *s);
extern void thin_space_free (struct thin_space *s);

/* Add free slots [p, p+n): clean (zero: known to read as zeros), or
 * freed with a discard maybe pending (the most recently freed now).
 * They merge with free neighbours of the same set.  A failure for want
 * of memory loses the slots until the next start (counted in lost,
 * reported).
 */
extern void thin_space_add_clean (struct thin_space *s, uint64_t p,
                                  uint64_t n, bool zero);
extern void thin_space_add_pending (struct thin_space *s, uint64_t p,
                                    uint64_t n);
/* Add freed slots [p, p+n) to the reserve: no discard sent or pending
 * (the most recently freed now).
 */
extern void thin_space_add_reserve (struct thin_space *s, uint64_t p,
                                    uint64_t n);

/* Take free_set (a plain extent map of slot ranges, owned from now on)
 * as all the clean slots, or all the zero ones; that set must be empty.
 */
extern void thin_space_adopt (struct thin_space *s, struct extmap *free_set,
                              bool zero);

/* The free run holding slot p, and its set (THIN_NOT_FREE: none). */
extern enum thin_free_kind thin_space_find (const struct thin_space *s,
                                            uint64_t p, struct extent *run);

/* The allocator's picks: the pending run that fits n best (the shortest
 * holding n, the most recently freed among those; if none holds n, the
 * longest); the longest clean run known to read as zeros if it holds n
 * (a first write there needs no zero-fill), else the longest clean run
 * (THIN_ZERO or THIN_CLEAN says which, THIN_NOT_FREE none); the pending
 * run freed longest ago.
 */
extern bool thin_space_best_pending (struct thin_space *s, uint64_t n,
                                     struct extent *run);
/* The same pick among the reserve's runs. */
extern bool thin_space_best_reserve (struct thin_space *s, uint64_t n,
                                     struct extent *run);
/* The reserve's longest run (ties: the lowest slot): the first to be
 * discarded when the reserve is over its size.
 */
extern bool thin_space_largest_reserve (const struct thin_space *s,
                                        struct extent *run);
extern enum thin_free_kind thin_space_largest_clean
  (const struct thin_space *s, uint64_t n, struct extent *run);
extern bool thin_space_oldest_pending (const struct thin_space *s,
                                       struct extent *run);

/* Whether all of [p, p+n) is clean and known to read as zeros. */
extern bool thin_space_is_zero (const struct thin_space *s, uint64_t p,
                                uint64_t n);

/* The backend says [p, p+n) reads as zeros: the clean slots in it are
 * known zero from now on.
 */
extern void thin_space_learn_zero (struct thin_space *s, uint64_t p,
                                   uint64_t n);

/* Take [p, p+n), within one free run, out of the free sets: all of a
 * pending run or an end of it (the middle works but loses the rest's
 * place in the order); any part of a clean one.  0, or -1 with errno
 * (EINVAL: not within one free run; ENOMEM).
 */
extern int thin_space_take (struct thin_space *s, uint64_t p, uint64_t n);

/* The same when the run holding p and its set are known (found by
 * thin_space_find, a pick, or thin_space_largest_clean, and nothing
 * changed since).
 */
extern int thin_space_take_from (struct thin_space *s,
                                 enum thin_free_kind kind,
                                 const struct extent *run, uint64_t p,
                                 uint64_t n);

/* Free slots in all: reserve, pending and clean. */
extern uint64_t thin_space_slots (const struct thin_space *s);
/* Slots in the reserve, and its runs (a plain extent map of slots). */
extern uint64_t thin_space_reserve_slots (const struct thin_space *s);
extern const struct extmap *thin_space_reserve_runs
  (const struct thin_space *s);

struct thin_space_stats {
  uint64_t pending, pending_runs, pending_largest;
  uint64_t reserve, reserve_runs;
  uint64_t clean, clean_runs, clean_largest, zero;
  size_t memory;
};
extern void thin_space_get_stats (const struct thin_space *s,
                                  struct thin_space_stats *st);

/* --- thin-journal.c: the meta file (format version 3) --- */

/* Layout (integers little-endian):
 *   header, THIN_HEADER_SIZE bytes:
 *     0 magic "DCTHIN\0\0"   8 version (u32)     12 header size (u32)
 *    16 slot size (u64)     24 exported size    32 backend size
 *    40 kind (char[8])      48 dev (u64)        56 inode (u64)
 *    64 next sequence number (u64)              72 runs (u64)
 *    80 payload size before compression (u64)   88 after (u64)
 *    96 unix time of the checkpoint (u64)      104 name length (u32)
 *   108 CRC-32C of the header (this field as 0), the name and the
 *       payload (u32)
 *   112 reserve runs (u64)
 *   the backend's name (no NUL), then the payload: one zstd frame of,
 *   per mapped run in logical order, three LEB128 varints: the gap from
 *   the end of the previous run (from 0 for the first), the length, and
 *   the physical start's distance from the end of the previous run's
 *   physical end, zigzag-coded (a run following on from the last one
 *   costs three bytes before compression); then per reserve run in
 *   physical order two varints: the gap from the end of the previous
 *   one, and the length.
 *   then journal records of THIN_RECORD_SIZE bytes:
 *     0 type (u32)                   4 slots in the run (u32)
 *     8 sequence number (u64)       16 logical start (u64)
 *    24 physical start (u32)        28 CRC-32C of bytes 0-27 (u32)
 *   types: 1 map; 2 unmap (its run's discard goes to the engine); 3 keep
 *   (an unmap whose run joins the reserve); 4 release (a reserve run,
 *   logical start 0, handed to the engine as a discard).
 * Version 2 (the same without the reserve: a 112-byte header, types 1
 * and 2) and version 1 (thin-meta-v1.c) are read to convert them.
 */
#define THIN_VERSION 3
#define THIN_HEADER_SIZE 120
#define THIN_V2_HEADER_SIZE 112
#define THIN_RECORD_SIZE 32

enum thin_record_type {
  THIN_REC_MAP = 1, THIN_REC_UNMAP = 2, THIN_REC_KEEP = 3,
  THIN_REC_RELEASE = 4,
};
struct thin_record {
  uint32_t type;
  uint32_t count;
  uint64_t seq;
  uint64_t logical;
  uint32_t phys;
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
/* 0, or -1 if the checksum, the type or the count is wrong. */
extern int thin_record_decode (const unsigned char in[THIN_RECORD_SIZE],
                               struct thin_record *r);

/* A checkpoint image of runs (a map of runs) and the reserve (a plain
 * extent map of physical slots, or NULL: none) for id: malloc'd into
 * *image, *len bytes.  0, or -1 with errno reported.
 */
extern int thin_checkpoint_encode (const struct thin_meta_id *id,
                                   const struct extmap *runs,
                                   const struct extmap *reserve,
                                   uint64_t next_seq, uint64_t time,
                                   void **image, size_t *len);

/* What recovery found. */
struct thin_recovery {
  uint64_t next_seq;           /* the next record's sequence number */
  size_t valid_len;            /* bytes up to the last good record */
  uint64_t records;            /* replayed */
  uint64_t checkpoint_time;
  size_t checkpoint_len;       /* header + name + payload */
  uint32_t version;            /* the format read (older: to be
                                  converted) */
  struct extmap *free;         /* physical slots no run maps (owned) */
  struct extmap *reserve;      /* the part of them in the reserve
                                  (owned) */
};

/* --- thin-recover.c: the reader for the image's version --- */

/* Rebuild m (initialised, empty) from a meta file image: the checkpoint,
 * then every record in sequence; a torn or corrupt tail ends the replay
 * (valid_len tells where).  Reads versions 1 to 3.  -1 with the reason
 * in why when the image belongs to something else, is of another
 * version, its checkpoint is corrupt, or a record with a good checksum
 * contradicts the map.  On success rec->free and rec->reserve are set:
 * take them or call thin_recovery_release.  On failure both are NULL.
 */
extern int thin_meta_recover (const void *image, size_t len,
                              const struct thin_meta_id *id,
                              struct thin_map *m, struct thin_recovery *rec,
                              char *why, size_t whylen);

/* Free the sets a recovery owns (whichever are still set) and clear
 * them, so that a member added later is freed wherever one is dropped.
 */
extern void thin_recovery_release (struct thin_recovery *rec);

/* --- thin-journal.c: versions 2 and 3, and what every reader shares --- */

/* The image's format version, after checking its magic and that this
 * build reads it (1 to THIN_VERSION, common/file-header.h); -1 with the
 * reason in why when it is not a thin meta file or another version.
 */
extern int thin_meta_version (const void *image, size_t len,
                              uint32_t *version, char *why, size_t whylen);

/* Load a version 2 or 3 image (rec->version set): its checkpoint, then
 * its records.  Same contract as thin_meta_recover, which calls it.
 */
extern int thin_meta_recover_v3 (const unsigned char *p, size_t len,
                                 const struct thin_meta_id *id,
                                 struct thin_map *m,
                                 struct thin_recovery *rec,
                                 char *why, size_t whylen);

/* Shared by every version's reader (thin-journal.c).  Both headers
 * hold the slot size, the exported size, the backend's size, kind,
 * device and inode at the same offsets; the name is elsewhere.
 */
extern int thin_check_identity (const unsigned char *p, const char *name,
                                size_t namelen, const struct thin_meta_id *id,
                                char *why, size_t whylen);
/* Replay the records of record_size bytes from off on, decoded by
 * decode, until a torn tail; sets rec->valid_len and rec->records.
 * rec->free, rec->reserve and rec->next_seq must be set.
 */
extern int thin_replay_records (const unsigned char *p, size_t len,
                                size_t off, size_t record_size,
                                int (*decode) (const unsigned char *,
                                               struct thin_record *),
                                struct thin_map *m, struct thin_recovery *rec,
                                char *why, size_t whylen);

/* --- thin-meta-v1.c: format version 1 --- */

#define THIN_V1_HEADER_SIZE 104
#define THIN_V1_RECORD_SIZE 24

/* Load a version 1 image (its checkpoint and journal) into m.  Same
 * contract as thin_meta_recover, which calls it.
 */
extern int thin_meta_recover_v1 (const unsigned char *p, size_t len,
                                 const struct thin_meta_id *id,
                                 struct thin_map *m,
                                 struct thin_recovery *rec,
                                 char *why, size_t whylen);

#endif /* DISCARDCACHE_THIN_PURE_H */
