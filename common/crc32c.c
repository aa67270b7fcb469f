/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: CRC-32C (see crc32c.h). */
#include <config.h>

#include <pthread.h>

#include "crc32c.h"

/* Reflected, table-driven.  The table is built once: the thin-mode
 * journal checksums every 24-byte record, where building it per call
 * would cost more than the checksum.
 */
static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void
build_table (void)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;

    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x82f63b78 : c >> 1;
    table[i] = c;
  }
}

uint32_t
crc32c (uint32_t crc, const void *buf, size_t n)
{
  const unsigned char *p = buf;

  pthread_once (&table_once, build_table);
  crc = ~crc;
  while (n--)
    crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}
