/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the kernel NBD client over generic netlink.  The
 * attribute layout follows drivers/block/nbd.c (nbd_genl_connect,
 * nbd_genl_reconfigure): sockets nest as NBD_ATTR_SOCKETS >
 * NBD_SOCK_ITEM > NBD_SOCK_FD, sizes and flags are u64, the index u32.
 * The kernel answers errors with an nlmsgerr; it is caught here so that
 * the errno reaches the user intact (libnl's own codes lose it).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <linux/nbd-netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "log.h"
#include "nbd-netlink.h"

struct nbd_nl {
  struct nl_sock *cmd;
  struct nl_sock *ev;          /* NULL: no events */
  int family;
  uint32_t ev_index;           /* the device nbd_nl_read_events counts */
  int ev_dead;
};

/* One request's outcome: the kernel's errno, and whether it is over. */
struct outcome {
  int error;
  bool done;
};

static int
on_error (struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
  struct outcome *o = arg;

  o->error = -e->error;
  o->done = true;
  return NL_STOP;
}

static int
on_ack (struct nl_msg *msg, void *arg)
{
  struct outcome *o = arg;

  o->done = true;
  return NL_STOP;
}

/* Send MSG (freed here) and wait for the kernel's ack or error; the
 * error reported unless it is QUIET_ERRNO.
 */
static int
transact (struct nbd_nl *nl, struct nl_msg *msg, const char *what,
          int quiet_errno)
{
  struct outcome o = { 0, false };
  struct nl_cb *cb = nl_cb_alloc (NL_CB_DEFAULT);
  int r;

  if (cb == NULL) {
    nlmsg_free (msg);
    dc_error ("nbd %s: out of memory", what);
    errno = ENOMEM;
    return -1;
  }
  nl_cb_err (cb, NL_CB_CUSTOM, on_error, &o);
  nl_cb_set (cb, NL_CB_ACK, NL_CB_CUSTOM, on_ack, &o);
  r = nl_send_auto (nl->cmd, msg);
  nlmsg_free (msg);
  while (r >= 0 && !o.done)
    r = nl_recvmsgs (nl->cmd, cb);
  nl_cb_put (cb);
  if (r < 0 && !o.done)
    o.error = EIO;
  if (o.error == 0)
    return 0;
  if (o.error != quiet_errno)
    dc_error ("nbd %s: %s", what, r < 0 && o.error == EIO ? nl_geterror (r)
                                                          : strerror (o.error));
  errno = o.error;
  return -1;
}

static struct nl_sock *
genl_socket (void)
{
  struct nl_sock *sk = nl_socket_alloc ();

  if (sk == NULL)
    return NULL;
  if (genl_connect (sk) < 0) {
    nl_socket_free (sk);
    return NULL;
  }
  return sk;
}

static int
join_events (struct nbd_nl *nl)
{
  int grp;

  nl->ev = genl_socket ();
  if (nl->ev == NULL)
    return -1;
  grp = genl_ctrl_resolve_grp (nl->ev, NBD_GENL_FAMILY_NAME,
                               NBD_GENL_MCAST_GROUP_NAME);
  if (grp < 0 || nl_socket_add_membership (nl->ev, grp) < 0)
    return -1;
  nl_socket_disable_seq_check (nl->ev);
  return nl_socket_set_nonblocking (nl->ev) < 0 ? -1 : 0;
}

struct nbd_nl *
nbd_nl_open (int events)
{
  struct nbd_nl *nl = calloc (1, sizeof *nl);

  if (nl == NULL || (nl->cmd = genl_socket ()) == NULL) {
    dc_error ("netlink: cannot open a generic netlink socket");
    goto err;
  }
  nl->family = genl_ctrl_resolve (nl->cmd, NBD_GENL_FAMILY_NAME);
  if (nl->family < 0) {
    dc_error ("the kernel has no \"nbd\" netlink family: load the nbd "
              "module (modprobe nbd)");
    errno = ENODEV;
    goto err;
  }
  if (events && join_events (nl) == -1) {
    dc_error ("netlink: cannot join the nbd event group");
    errno = EIO;
    goto err;
  }
  return nl;

 err:
  nbd_nl_close (nl);
  return NULL;
}

void
nbd_nl_close (struct nbd_nl *nl)
{
  if (nl == NULL)
    return;
  if (nl->cmd)
    nl_socket_free (nl->cmd);
  if (nl->ev)
    nl_socket_free (nl->ev);
  free (nl);
}

static struct nl_msg *
new_msg (struct nbd_nl *nl, uint8_t cmd, uint32_t index)
{
  struct nl_msg *msg = nlmsg_alloc ();

  if (msg == NULL)
    return NULL;
  if (genlmsg_put (msg, NL_AUTO_PORT, NL_AUTO_SEQ, nl->family, 0, 0, cmd,
                   NBD_GENL_VERSION) == NULL ||
      nla_put_u32 (msg, NBD_ATTR_INDEX, index) < 0) {
    nlmsg_free (msg);
    return NULL;
  }
  return msg;
}

static int
put_sockets (struct nl_msg *msg, const int *fds, int nfds)
{
  struct nlattr *socks = nla_nest_start (msg, NBD_ATTR_SOCKETS);

  if (socks == NULL)
    return -1;
  for (int i = 0; i < nfds; i++) {
    struct nlattr *item = nla_nest_start (msg, NBD_SOCK_ITEM);

    if (item == NULL || nla_put_u32 (msg, NBD_SOCK_FD, fds[i]) < 0)
      return -1;
    nla_nest_end (msg, item);
  }
  nla_nest_end (msg, socks);
  return 0;
}

static int
no_room (struct nl_msg *msg, const char *what)
{
  nlmsg_free (msg);
  dc_error ("nbd %s: cannot build the netlink message", what);
  errno = ENOMEM;
  return -1;
}

int
nbd_nl_connect (struct nbd_nl *nl, const struct nbd_nl_config *c)
{
  struct nl_msg *msg = new_msg (nl, NBD_CMD_CONNECT, c->index);

  if (msg == NULL)
    return no_room (NULL, "connect");
  if (nla_put_u64 (msg, NBD_ATTR_SIZE_BYTES, c->size) < 0 ||
      nla_put_u64 (msg, NBD_ATTR_BLOCK_SIZE_BYTES, c->block_size) < 0 ||
      nla_put_u64 (msg, NBD_ATTR_SERVER_FLAGS, c->server_flags) < 0 ||
      nla_put_u64 (msg, NBD_ATTR_DEAD_CONN_TIMEOUT, c->dead_timeout_s) < 0 ||
      put_sockets (msg, c->fds, c->nfds) == -1)
    return no_room (msg, "connect");
  return transact (nl, msg, "connect", EBUSY);
}

int
nbd_nl_reconfigure (struct nbd_nl *nl, uint32_t index, const int *fds,
                    int nfds)
{
  struct nl_msg *msg = new_msg (nl, NBD_CMD_RECONFIGURE, index);

  if (msg == NULL || put_sockets (msg, fds, nfds) == -1)
    return no_room (msg, "reconfigure");
  return transact (nl, msg, "reconfigure", 0);
}

int
nbd_nl_disconnect (struct nbd_nl *nl, uint32_t index)
{
  struct nl_msg *msg = new_msg (nl, NBD_CMD_DISCONNECT, index);

  if (msg == NULL)
    return no_room (msg, "disconnect");
  return transact (nl, msg, "disconnect", 0);
}

int
nbd_nl_event_fd (const struct nbd_nl *nl)
{
  return nl->ev ? nl_socket_get_fd (nl->ev) : -1;
}

static int
on_event (struct nl_msg *msg, void *arg)
{
  struct nbd_nl *nl = arg;
  struct genlmsghdr *gh = nlmsg_data (nlmsg_hdr (msg));
  struct nlattr *a[NBD_ATTR_MAX + 1];

  if (gh->cmd != NBD_CMD_LINK_DEAD ||
      genlmsg_parse (nlmsg_hdr (msg), 0, a, NBD_ATTR_MAX, NULL) < 0)
    return NL_OK;
  if (a[NBD_ATTR_INDEX] && nla_get_u32 (a[NBD_ATTR_INDEX]) == nl->ev_index)
    nl->ev_dead++;
  return NL_OK;
}

int
nbd_nl_read_events (struct nbd_nl *nl, uint32_t index)
{
  int r;

  nl->ev_index = index;
  nl->ev_dead = 0;
  nl_socket_modify_cb (nl->ev, NL_CB_VALID, NL_CB_CUSTOM, on_event, nl);
  r = nl_recvmsgs_default (nl->ev);
  /* Non-blocking: "try again" ends the batch. */
  if (r < 0 && r != -NLE_AGAIN) {
    dc_error ("netlink: reading nbd events: %s", nl_geterror (r));
    return -1;
  }
  return nl->ev_dead;
}

int
nbd_nl_parse_device (const char *dev, uint32_t *index)
{
  const char *p = strncmp (dev, "/dev/", 5) == 0 ? dev + 5 : dev;
  char *end;
  unsigned long n;

  if (strncmp (p, "nbd", 3) != 0 || p[3] < '0' || p[3] > '9')
    goto bad;
  errno = 0;
  n = strtoul (p + 3, &end, 10);
  if (errno || *end || n > INT32_MAX)
    goto bad;
  *index = n;
  return 0;
 bad:
  dc_error ("%s: not an NBD device (expected /dev/nbdN)", dev);
  errno = EINVAL;
  return -1;
}
