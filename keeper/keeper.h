/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the keeper, which attaches /dev/nbdN to a server's Unix
 * socket through the kernel's netlink NBD interface and hands the device
 * new connections whenever the server there is restarted.
 */
#ifndef DISCARDCACHE_KEEPER_H
#define DISCARDCACHE_KEEPER_H

#include <stdbool.h>
#include <stdint.h>

struct keeper_options {
  const char *socket;          /* the server's Unix socket */
  const char *device;          /* /dev/nbdN */
  int connections;             /* 1 or more */
  uint64_t dead_timeout_ms;    /* the kernel holds I/O this long */
  bool foreground;             /* keep the keeper in this process */
  bool adopt;                  /* a device already connected: keep it */
  const char *log;             /* the daemon's stderr, NULL: /dev/null */
};

/* Handshake, connect the device (with adopt, a device connected
 * already is kept), and return once it is ready, leaving
 * the keeper (in a child, or in this process until a signal with
 * foreground).  Returns 0 or -1 with the error reported.
 */
extern int keeper_attach (const struct keeper_options *o);

/* Stop the device's keeper and disconnect the device.  0 or -1,
 * reported.
 */
extern int keeper_detach (const char *device);

#endif /* DISCARDCACHE_KEEPER_H */
