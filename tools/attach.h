/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: discardctl's attach and detach commands. */
#ifndef DISCARDCACHE_ATTACH_H
#define DISCARDCACHE_ATTACH_H

/* argv[0] is "attach" or "detach".  Returns discardctl's exit status. */
extern int attach_main (int argc, char **argv);

#endif /* DISCARDCACHE_ATTACH_H */
