/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: which part of a pending extent may be sent to the backend.
 * Pure functions, so the alignment rules are tested on their own.
 */
#ifndef DISCARDCACHE_POLICY_H
#define DISCARDCACHE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* Align [offset, offset+length) inward to granularity (a power of two).
 * The unaligned head and tail stay pending until neighbours complete
 * their granule.  Returns false when nothing aligned remains.
 */
extern bool policy_aligned_part (uint64_t offset, uint64_t length,
                                 uint64_t granularity,
                                 uint64_t *aligned_offset,
                                 uint64_t *aligned_length);

/* The largest discard to send at once: max_discard rounded down to a
 * multiple of granularity, and never less than one granule.
 */
extern uint64_t policy_chunk_limit (uint64_t max_discard,
                                    uint64_t granularity);

#endif /* DISCARDCACHE_POLICY_H */
