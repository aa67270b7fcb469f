/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: numbers as people read them, for discardctl. */
#ifndef DISCARDCACHE_HUMAN_H
#define DISCARDCACHE_HUMAN_H

#include <stddef.h>
#include <stdint.h>

/* Room for any of the strings below. */
#define HUMAN_LEN 32

/* Bytes in powers of 1024 with one decimal: "512 B", "1.5 MiB". */
extern const char *human_size (uint64_t bytes, char buf[HUMAN_LEN]);

/* A duration: "450 ms", "12.3 s", "4m05s", "2h10m". */
extern const char *human_duration (uint64_t ms, char buf[HUMAN_LEN]);

/* part of whole as a percentage: "88%", "n/a" when whole is 0. */
extern const char *human_percent (uint64_t part, uint64_t whole,
                                  char buf[HUMAN_LEN]);

#endif /* DISCARDCACHE_HUMAN_H */
