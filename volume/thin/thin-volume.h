/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the thin volume (thin-internal.h lists its files; the
 * map and the meta file are in thin-pure.h).  Opened through volume_open
 * with thin=on; each data-path call has volume.h's semantics on the
 * exported (logical) disk and goes to the engine at physical addresses.
 */
#ifndef DISCARDCACHE_THIN_VOLUME_H
#define DISCARDCACHE_THIN_VOLUME_H

#include <stdint.h>

#include "volume.h"

/* Checkpoint when the journal passes bytes, however large the map
 * (tests make it small).  v must be a thin volume.
 */
extern void thin_set_journal_limit (struct volume *v, uint64_t bytes);

/* Discard the whole reuse reserve: its runs go to the engine as
 * pending discards (volume_release_reserve; and the low-water= hook in
 * thin-reserve.c).  0, or -1 (reported).
 */
extern int thin_release_reserve (struct volume *v);

#endif /* DISCARDCACHE_THIN_VOLUME_H */
