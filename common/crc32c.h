/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: CRC-32C (Castagnoli), the checksum of the on-disk
 * formats (state file, thin-mode meta file).
 */
#ifndef DISCARDCACHE_CRC32C_H
#define DISCARDCACHE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue crc (0 to start) over n bytes at p. */
extern uint32_t crc32c (uint32_t crc, const void *p, size_t n);

#endif /* DISCARDCACHE_CRC32C_H */
