/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the kernel NBD client driven over generic netlink
 * (family "nbd", linux/nbd-netlink.h): connect a device, hand it new
 * sockets, disconnect it, and hear when a connection dies.
 */
#ifndef DISCARDCACHE_NBD_NETLINK_H
#define DISCARDCACHE_NBD_NETLINK_H

#include <stdint.h>

struct nbd_nl;

/* What NBD_CMD_CONNECT sets up. */
struct nbd_nl_config {
  uint32_t index;              /* /dev/nbdINDEX */
  uint64_t size;               /* bytes */
  uint64_t block_size;         /* logical block size */
  uint64_t server_flags;       /* the export's transmission flags */
  uint64_t dead_timeout_s;     /* I/O waits this long for a reconnect */
  const int *fds;              /* handshaken sockets */
  int nfds;
};

/* Open the command and event sockets and resolve the "nbd" family.
 * NULL with the error reported (a clear one when the nbd module is not
 * loaded).  EVENTS: also join the multicast group for link-dead events.
 */
extern struct nbd_nl *nbd_nl_open (int events);
extern void nbd_nl_close (struct nbd_nl *nl);

/* NBD_CMD_CONNECT; returns once the device is live.  -1 with errno,
 * the error reported, except EBUSY (the device is connected already),
 * left to the caller.
 */
extern int nbd_nl_connect (struct nbd_nl *nl, const struct nbd_nl_config *c);

/* NBD_CMD_RECONFIGURE with new sockets, each replacing a dead one.  The
 * kernel answers success when no connection was dead (the socket is
 * then dropped): the caller knows how many are.  -1 with errno,
 * reported.
 */
extern int nbd_nl_reconfigure (struct nbd_nl *nl, uint32_t index,
                               const int *fds, int nfds);

/* NBD_CMD_DISCONNECT.  -1 with errno, reported. */
extern int nbd_nl_disconnect (struct nbd_nl *nl, uint32_t index);

/* The event socket's descriptor, to poll for input. */
extern int nbd_nl_event_fd (const struct nbd_nl *nl);

/* Read the pending events; returns how many NBD_CMD_LINK_DEAD named
 * INDEX, -1 on error (reported).
 */
extern int nbd_nl_read_events (struct nbd_nl *nl, uint32_t index);

/* Parse "/dev/nbdN" (or "nbdN") into N; -1 with EINVAL, reported. */
extern int nbd_nl_parse_device (const char *dev, uint32_t *index);

#endif /* DISCARDCACHE_NBD_NETLINK_H */
