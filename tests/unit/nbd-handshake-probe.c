/* SPDX-License-Identifier: BSD-3-Clause */
/* The keeper's NBD handshake (keeper/nbd-handshake.c) against a real
 * server, without the kernel: nbd-handshake-probe SOCKET prints what
 * NBD_OPT_GO told, then sends one NBD_CMD_READ on the socket and checks
 * the reply, to show the socket is left ready for transmission (as the
 * kernel will use it).  Exit 1 with the error on stderr.
 * tests/e2e/test-nbd-handshake.sh drives it.
 */
#include <config.h>

#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nbd-handshake.h"

#define REQUEST_MAGIC 0x25609513
#define REPLY_MAGIC 0x67446698

static int
read_one_block (int fd)
{
  struct { uint32_t magic; uint16_t flags, type; uint64_t handle, offset;
           uint32_t len; } __attribute__ ((packed)) rq = {
    .magic = htobe32 (REQUEST_MAGIC), .type = htobe16 (0),
    .handle = 42, .offset = 0, .len = htobe32 (512),
  };
  struct { uint32_t magic, error; uint64_t handle; }
    __attribute__ ((packed)) rp;
  char buf[512];

  if (write (fd, &rq, sizeof rq) != sizeof rq ||
      read (fd, &rp, sizeof rp) != sizeof rp ||
      be32toh (rp.magic) != REPLY_MAGIC || rp.error != 0 ||
      rp.handle != 42) {
    fprintf (stderr, "probe: no simple reply to a read\n");
    return -1;
  }
  for (size_t got = 0; got < sizeof buf;) {
    ssize_t r = read (fd, buf + got, sizeof buf - got);

    if (r <= 0)
      return -1;
    got += r;
  }
  return 0;
}

int
main (int argc, char **argv)
{
  struct nbd_export_info info;
  int fd;

  if (argc != 2) {
    fprintf (stderr, "usage: nbd-handshake-probe SOCKET\n");
    return 2;
  }
  fd = nbd_handshake_unix (argv[1], &info, 0);
  if (fd == -1)
    return 1;
  printf ("size=%" PRIu64 " flags=0x%x min=%" PRIu32 " pref=%" PRIu32 "\n",
          info.size, info.flags, info.min_block, info.pref_block);
  if (read_one_block (fd) == -1)
    return 1;
  close (fd);
  return 0;
}
