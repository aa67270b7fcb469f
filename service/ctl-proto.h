/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache: the control protocol's pure parts, shared by the server
 * (ctl.c) and discardctl, and fuzzed on their own: request lines, the
 * line assembler, the flush replies' keys, error replies and the default
 * socket directory.
 *
 * The protocol (version 1).  The server greets each client with one line
 *   {"ok":true,"hello":"discardcache","protocol":1,...}
 * then reads request lines (at most CTL_MAX_LINE bytes of printable
 * ASCII, ended by "\n") and answers each with JSON objects, one a line.
 * The last line of every reply carries "ok" (true, or false with
 * "error"); lines before it (dump extents, flush progress) do not.
 * Requests: stats | flush [--wait] [--progress] [--reserve] | dump [--map] |
 * pause | resume |
 * set KEY=VALUE [KEY=VALUE...] | forget-clean | help.  set answers one
 * line {"set":KEY,"value":VALUE} per pair, the last with "ok":true, so
 * that a single pair gets the one line it got before several were
 * allowed.
 */
#ifndef DISCARDCACHE_CTL_PROTO_H
#define DISCARDCACHE_CTL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CTL_PROTOCOL_VERSION 1
/* Longest request line, without its newline.  Longer: error, then close. */
#define CTL_MAX_LINE 4096
/* The commands, as help and error replies list them. */
#define CTL_COMMANDS \
  "stats, flush [--wait] [--progress] [--reserve], dump [--map], pause, " \
  "resume, " \
  "set KEY=VALUE [KEY=VALUE...], forget-clean, help"
/* Most KEY=VALUE pairs in one set request. */
#define CTL_SET_MAX 16

enum ctl_command {
  CTL_STATS,
  CTL_FLUSH,
  CTL_DUMP,
  CTL_PAUSE,
  CTL_RESUME,
  CTL_SET,
  CTL_FORGET_CLEAN,
  CTL_HELP,
};

struct ctl_request {
  enum ctl_command command;
  bool wait;                   /* flush --wait */
  bool progress;               /* flush --progress (implies --wait) */
  bool reserve;                /* flush --reserve: thin mode's reuse
                                  reserve too */
  bool map;                    /* dump --map: the thin slot map */
  size_t nset;                 /* set: pairs, each different keys, */
  const char *keys[CTL_SET_MAX]; /* pointing into the parsed line */
  const char *values[CTL_SET_MAX];
};

/* A flush's replies, as ctl_flush_write starts each line. */
enum ctl_flush_reply {
  CTL_FLUSH_STARTED = 1,        /* {"ok":true,"flush":"started",...} */
  CTL_FLUSH_PROGRESS = 2,       /* {"progress":true,...}: --progress */
  CTL_FLUSH_DONE = 4,           /* {"ok":true,"flush":"done",...}: --wait */
};
#define CTL_FLUSH_WAITED (CTL_FLUSH_PROGRESS | CTL_FLUSH_DONE)

/* The numbers of a flush's replies, one entry a key, in the order they
 * are written: X (name, replies), name the JSON key, replies those that
 * carry it.  The server writes them from this table and discardctl
 * reads them by it, each naming a key as CTL_FLUSH_KEY_name: a misspelt
 * key does not compile (typed by hand on each side, it read as 0).
 */
#define CTL_FLUSH_KEYS(X)                                               \
  X (forwarded, CTL_FLUSH_WAITED)          /* discards since it began */ \
  X (forwarded_bytes, CTL_FLUSH_WAITED)                                 \
  X (total_bytes, CTL_FLUSH_STARTED | CTL_FLUSH_WAITED) /* to forward */ \
  X (elapsed_ms, CTL_FLUSH_WAITED)                                      \
  X (pending_extents, CTL_FLUSH_DONE)      /* what is left pending */   \
  X (pending_bytes, CTL_FLUSH_DONE)                                     \
  X (subgranule_bytes, CTL_FLUSH_DONE)

enum ctl_flush_key {
#define CTL_FLUSH_KEY_ENUM(name, replies) CTL_FLUSH_KEY_##name,
  CTL_FLUSH_KEYS (CTL_FLUSH_KEY_ENUM)
#undef CTL_FLUSH_KEY_ENUM
  CTL_FLUSH_NKEYS
};

/* The JSON key of each. */
extern const char *const ctl_flush_keys[CTL_FLUSH_NKEYS];

/* Write the line of reply, with v's numbers for the keys it carries. */
extern void ctl_flush_write (FILE *fp, enum ctl_flush_reply reply,
                             const uint64_t v[CTL_FLUSH_NKEYS])
  __attribute__ ((nonnull (1, 3)));

/* Parse one request line of len bytes (no newline; a trailing "\r" is
 * ignored).  Tokens are split in place, so line must be writable and
 * have room for len + 1 bytes.  Returns 0, or -1 with a message for the
 * client in err (which names the accepted forms).
 */
extern int ctl_parse_request (char *line, size_t len, struct ctl_request *req,
                              char *err, size_t errlen)
  __attribute__ ((nonnull (1, 3, 4)));

/* Collects bytes read from a socket into lines. */
struct ctl_linebuf {
  size_t len;                  /* bytes held */
  size_t consumed;             /* bytes of the last line taken */
  char buf[CTL_MAX_LINE + 1];
};

/* Where to read into, and how much room is left (never 0 unless a line
 * is too long, which ctl_linebuf_next reports first).
 */
extern char *ctl_linebuf_space (struct ctl_linebuf *lb, size_t *room)
  __attribute__ ((nonnull (1, 2)));

/* Record n bytes read into the space. */
extern void ctl_linebuf_added (struct ctl_linebuf *lb, size_t n)
  __attribute__ ((nonnull (1)));

/* The next complete line: 1 with *line (writable, NUL-terminated) and
 * *len set, valid until the next call; 0 if more bytes are needed; -1 if
 * CTL_MAX_LINE bytes came without a newline.
 */
extern int ctl_linebuf_next (struct ctl_linebuf *lb, char **line, size_t *len)
  __attribute__ ((nonnull (1, 2, 3)));

/* Write an error reply line: {"ok":false,"error":"..."}. */
extern void ctl_json_error (FILE *fp, const char *msg)
  __attribute__ ((nonnull (1, 2)));

/* The directory where servers put their default sockets:
 * $XDG_RUNTIME_DIR/discardcache when XDG_RUNTIME_DIR is set (and
 * absolute), else /run/discardcache.  Returns 0, or -1 if it does not
 * fit in n bytes.
 */
extern int ctl_default_dir (char *buf, size_t n)
  __attribute__ ((nonnull (1)));

#endif /* DISCARDCACHE_CTL_PROTO_H */
