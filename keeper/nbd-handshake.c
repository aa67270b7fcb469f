/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the NBD fixed newstyle handshake, client side (NBD
 * doc/proto.md: "Fixed newstyle negotiation", NBD_OPT_GO).  Only what
 * the kernel client needs: the default export, its size, its
 * transmission flags and its block sizes.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "nbd-handshake.h"

#define NBD_MAGIC          UINT64_C(0x4e42444d41474943) /* "NBDMAGIC" */
#define NBD_OPT_MAGIC      UINT64_C(0x49484156454f5054) /* "IHAVEOPT" */
#define NBD_REP_MAGIC      UINT64_C(0x0003e889045565a9)
#define FLAG_FIXED_NEWSTYLE 1
#define FLAG_NO_ZEROES      2
#define OPT_GO              7
#define REP_ACK             1
#define REP_INFO            3
#define REP_FLAG_ERROR      (UINT32_C(1) << 31)
#define INFO_EXPORT         0
#define INFO_BLOCK_SIZE     3
/* An NBD_REP_INFO is a few bytes; anything longer is read and dropped. */
#define MAX_REPLY           4096

struct hs {
  int fd;
  bool quiet;
};

static int
hs_fail (const struct hs *h, int err, const char *what)
{
  if (!h->quiet)
    dc_error ("nbd handshake: %s: %s", what, strerror (err));
  errno = err;
  return -1;
}

static int
read_full (struct hs *h, void *buf, size_t len)
{
  char *p = buf;

  while (len > 0) {
    ssize_t r = read (h->fd, p, len);

    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0)
      return hs_fail (h, r == 0 ? ECONNRESET : errno, "read");
    p += r;
    len -= r;
  }
  return 0;
}

static int
write_full (struct hs *h, const void *buf, size_t len)
{
  const char *p = buf;

  while (len > 0) {
    ssize_t r = send (h->fd, p, len, MSG_NOSIGNAL);

    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      return hs_fail (h, errno, "write");
    p += r;
    len -= r;
  }
  return 0;
}

static int
connect_unix (struct hs *h, const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };

  if (strlen (path) >= sizeof sun.sun_path)
    return hs_fail (h, ENAMETOOLONG, path);
  strcpy (sun.sun_path, path);
  h->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (h->fd == -1)
    return hs_fail (h, errno, "socket");
  if (connect (h->fd, (struct sockaddr *) &sun, sizeof sun) == -1)
    return hs_fail (h, errno, path);
  return 0;
}

/* The server's greeting and our client flags. */
static int
greet (struct hs *h)
{
  struct { uint64_t magic, opt_magic; uint16_t flags; }
    __attribute__ ((packed)) g;
  uint32_t cflags;

  if (read_full (h, &g, sizeof g) == -1)
    return -1;
  if (be64toh (g.magic) != NBD_MAGIC || be64toh (g.opt_magic) != NBD_OPT_MAGIC)
    return hs_fail (h, EPROTO, "not a newstyle NBD server");
  if (!(be16toh (g.flags) & FLAG_FIXED_NEWSTYLE))
    return hs_fail (h, EPROTO, "the server lacks fixed newstyle");
  cflags = htobe32 (FLAG_FIXED_NEWSTYLE |
                    (be16toh (g.flags) & FLAG_NO_ZEROES));
  return write_full (h, &cflags, sizeof cflags);
}

/* NBD_OPT_GO for export "", asking for the block sizes too. */
static int
send_go (struct hs *h)
{
  struct {
    uint64_t magic; uint32_t opt, len;
    uint32_t namelen; uint16_t ninfos, info;
  } __attribute__ ((packed)) o = {
    .magic = htobe64 (NBD_OPT_MAGIC), .opt = htobe32 (OPT_GO),
    .len = htobe32 (4 + 2 + 2), .namelen = 0,
    .ninfos = htobe16 (1), .info = htobe16 (INFO_BLOCK_SIZE),
  };

  return write_full (h, &o, sizeof o);
}

static void
take_info (const unsigned char *d, uint32_t len, struct nbd_export_info *info)
{
  uint16_t type;
  uint32_t v;
  uint64_t size;

  if (len < 2)
    return;
  memcpy (&type, d, 2);
  type = be16toh (type);
  if (type == INFO_EXPORT && len >= 12) {
    memcpy (&size, d + 2, 8);
    info->size = be64toh (size);
    memcpy (&type, d + 10, 2);
    info->flags = be16toh (type);
  }
  else if (type == INFO_BLOCK_SIZE && len >= 14) {
    memcpy (&v, d + 2, 4);
    info->min_block = be32toh (v);
    memcpy (&v, d + 6, 4);
    info->pref_block = be32toh (v);
  }
}

/* Replies until NBD_REP_ACK (done) or an error. */
static int
read_replies (struct hs *h, struct nbd_export_info *info)
{
  struct { uint64_t magic; uint32_t opt, type, len; }
    __attribute__ ((packed)) r;
  unsigned char data[MAX_REPLY];
  bool have_export = false;

  for (;;) {
    uint32_t type, len;

    if (read_full (h, &r, sizeof r) == -1)
      return -1;
    type = be32toh (r.type);
    len = be32toh (r.len);
    if (be64toh (r.magic) != NBD_REP_MAGIC || be32toh (r.opt) != OPT_GO ||
        len > MAX_REPLY)
      return hs_fail (h, EPROTO, "bad option reply");
    if (read_full (h, data, len) == -1)
      return -1;
    if (type & REP_FLAG_ERROR)
      return hs_fail (h, ENXIO, "the server refused the export");
    if (type == REP_INFO) {
      take_info (data, len, info);
      have_export |= len >= 12 && data[0] == 0 && data[1] == INFO_EXPORT;
    }
    else if (type == REP_ACK)
      return have_export ? 0 : hs_fail (h, EPROTO, "no export information");
  }
}

int
nbd_handshake_unix (const char *path, struct nbd_export_info *info,
                    int quiet)
{
  struct hs h = { .fd = -1, .quiet = quiet };

  memset (info, 0, sizeof *info);
  if (connect_unix (&h, path) == -1 || greet (&h) == -1 ||
      send_go (&h) == -1 || read_replies (&h, info) == -1) {
    int saved_errno = errno;

    if (h.fd >= 0)
      close (h.fd);
    errno = saved_errno;
    return -1;
  }
  return h.fd;
}
