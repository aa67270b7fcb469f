#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: one round of the journal's crash loop
# (test-journal-crash.sh).  The server runs with state=, delay=1h (the
# flusher never forwards by itself) and granularity = BLOCK, so the
# pending set and the known-clean map are exact sets of blocks that this
# script models.
#
# A round first checks what the start replayed against the model saved
# by the previous round:
#   - the pending set (discardctl dump), block by block, equals the
#     model's pending set at the last completed FLUSH, plus the blocks
#     known clean then and written since (they are data, not holes, so
#     replay moves them to pending: docs/design-notes.md); if a FLUSH was
#     in flight at the kill, the model at that FLUSH is accepted too.
#     After a kill -9 (not a power cut) the journal's file holds every
#     record of a write's cancel before the write went out, so the sets
#     of any moment between the last FLUSH and the kill are accepted
#     (the file holds some prefix of the records), and
#   - kill -9 only: no block whose last command was a write, flushed or
#     not, is pending, and each reads back as written (invariant 10: a
#     crash of the process alone replays no discard over an
#     acknowledged write);
#   - the known-clean bytes equal the model's;
#   - every block whose last command was a write acknowledged before the
#     last completed FLUSH reads back as written (never discarded);
#   - every tenth round, a TRIM of the whole disk and a discardctl flush
#     send exactly the bytes not known clean (what an fstrim would).
# Then it runs random writes, trims, zeroes, FLUSHes and discardctl
# flushes, and kills the server (kill -9) with nothing in flight or just
# after sending a FLUSH.
#
# usage: journal-crash.py DISK CTL DISCARDCTL MODEL ROUND BLOCKS PID
#        [DEVICE_PID]
# DISK: a Unix socket (nbdkit), or the disk file of discardfuse, where a
# pwrite is a write, fallocate PUNCH_HOLE a trim and fsync a FLUSH (no
# zeroes there, and nothing in flight at the kill).
# DEVICE_PID: power-cut mode (test-journal-powercut.sh): the process
# that holds the volatile write cache of the device under the backend's
# file system; it is killed with the server, just before it.
import ctypes
import os
import pickle
import random
import signal
import subprocess
import sys
import time

import nbd

BLOCK = 4096
disk, ctl, discardctl, model_path = sys.argv[1:5]
rnd, nblocks, pid = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
device_pid = int(sys.argv[8]) if len(sys.argv) > 8 else None
rng = random.Random(int(os.environ.get("JOURNAL_CRASH_SEED", "1")) * 1000003 + rnd)


def fail(msg):
    print(f"journal-crash round {rnd}: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def ctl_cmd(*args):
    return subprocess.run([discardctl, "-s", ctl, *args], check=True,
                          capture_output=True, text=True).stdout


def stats():
    import json
    return json.loads(ctl_cmd("stats", "--json"))


def dumped_pending():
    blocks = set()
    for line in ctl_cmd("dump").splitlines():
        off, length = (int(x) for x in line.split()[:2])
        if off % BLOCK or length % BLOCK:
            fail(f"pending extent {off}+{length} is not in whole blocks")
        blocks.update(range(off // BLOCK, (off + length) // BLOCK))
    return blocks


def pattern(block, tag):
    head = f"{block}:{tag}:".encode()
    return (head * (BLOCK // len(head) + 1))[:BLOCK]


def show(s):
    return sorted(s)[:10]


# The model.  pending, clean: block sets now.  last[b]: ("w", tag) for a
# write, ("t",) for a trim, ("z",) for a zero.  data_since: blocks that
# hold data written since the last completed FLUSH (zeroes and forwarded
# discards make holes).  flushed: (pending, clean, protected) at the last
# completed FLUSH; protected: {block: tag} whose last command then was a
# write.  inflight: the same at a FLUSH in flight at the kill, or None.
# ops: the commands since the last completed FLUSH, ("w"|"t"|"z", block,
# count) or ("f", 0, 0) for a discardctl flush, to rebuild the sets of
# every moment since.
if os.path.exists(model_path):
    with open(model_path, "rb") as f:
        m = pickle.load(f)
else:
    m = {"pending": set(), "clean": set(), "last": {}, "data_since": set(),
         "flushed": (set(), set(), {}), "inflight": None, "ops": []}

class FileDisk:
    """discardfuse's disk file, with the calls of a libnbd handle."""
    PUNCH = 0x02 | 0x01                   # FALLOC_FL_PUNCH_HOLE | KEEP_SIZE

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR)
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int,
                                        ctypes.c_long, ctypes.c_long]

    def get_size(self):
        return os.fstat(self.fd).st_size

    def pwrite(self, buf, off):
        os.pwrite(self.fd, buf, off)

    def pread(self, n, off):
        return os.pread(self.fd, n, off)

    def trim(self, n, off):
        if self.libc.fallocate(self.fd, self.PUNCH, off, n) != 0:
            raise OSError(ctypes.get_errno(), "fallocate")

    def flush(self):
        os.fsync(self.fd)


if disk.endswith(".sock"):
    h = nbd.NBD()
    h.connect_unix(disk)
else:
    h = FileDisk(disk)
nbd_mode = isinstance(h, nbd.NBD)
if h.get_size() != nblocks * BLOCK:
    fail("unexpected size")

def apply_op(pend, clean, op):
    """The sets after one command of the model (as the loop below)."""
    kind, b, n = op
    blocks = set(range(b, b + n))
    if kind == "w":
        return pend - blocks, clean - blocks
    if kind == "t":
        return pend | (blocks - clean), clean
    if kind == "zc":
        return pend - blocks, clean - blocks
    if kind == "z":
        return pend - blocks, clean | blocks
    return set(), clean | pend                      # "f": discardctl flush


def moments():
    """(pending, clean, data written after that moment) at the last FLUSH
    and after each command since.  A zero's records come in two steps
    (its cancel before the backend's zero, "zc", the range clean after
    it), and a write-through can fall between them."""
    pend, clean, _ = m["flushed"]
    states = [(set(pend), set(clean))]
    ops = []
    for op in m.get("ops", []):
        ops += [("zc",) + op[1:], op] if op[0] == "z" else [op]
    for op in ops:
        pend, clean = apply_op(pend, clean, op)
        states.append((pend, clean))
    out = []
    for k, (pend, clean) in enumerate(states):
        after = set()
        for i in range(k, len(ops)):
            kind, b, n = ops[i]
            blocks = set(range(b, b + n))
            if kind == "w":
                after |= blocks
            elif kind == "z":
                after -= blocks
            elif kind == "f":
                after -= states[i][0]
        out.append((pend, clean, after))
    return out


# --- the replay ---
got = dumped_pending()
st = stats()
candidates = [m["flushed"]] + ([m["inflight"]] if m["inflight"] else [])
since = [(p, c, m["data_since"]) for p, c, _ in candidates]
if device_pid is None:
    since += moments()


def replayed_sets(pend, clean, data_after):
    """The pending and known-clean sets after the replay, if it fits the
    model at a moment that left PEND and CLEAN, DATA_AFTER written
    since; else None."""
    moved = clean & data_after
    if device_pid is None:
        if got == pend | moved and st["clean_bytes"] == len(clean - moved) * BLOCK:
            return pend | moved, clean - moved
        return None
    # A power cut loses what kill -9 keeps: the page cache of the file
    # system that holds the backend, and the device's write cache.  So
    # a known-clean block may come back clean or pending, nothing else:
    # - written since the FLUSH (moved): the write may have been lost
    #   whole; the file then still has a hole there, the start's
    #   allocation check keeps the claim, and the block must read zeros
    #   (checked below);
    # - not written since: the hole punch (or zeroing) that made it
    #   clean may have been lost while its clean record became durable
    #   (seen with a FLUSH in flight at the cut: its records are written
    #   out before its backend flush commits the punch, and the device
    #   may write them first); the allocation check then finds data and
    #   moves the block to pending: a repeated discard, never data lost
    #   (docs/design-notes.md, "One flush for the journal and the
    #   backend").
    # The pending set at the FLUSH must come back whole, and nothing
    # outside it and the clean set may be pending.
    back = got - pend
    if pend <= got and back <= clean and \
       st["clean_bytes"] == len(clean - back) * BLOCK:
        return got, clean - back
    return None


match = None
for which, (pend, clean, data_after) in enumerate(since):
    sets = replayed_sets(pend, clean, data_after)
    if sets is not None:
        match = (*sets, candidates[min(which, len(candidates) - 1)][2])
        # power cut: blocks known clean, not written since, back pending
        unpunched = got - pend - m["data_since"]
        break
if match is None and device_pid is None:
    # kill -9: no single moment fits, but every pending block was pending
    # at one.  The model takes a discardctl flush as one step; the engine
    # records it extent by extent (each removed from the pending map as
    # its discard goes out, added to the clean map when it completes),
    # and the journal's thread commits whenever its buffer passes 1,024
    # records, so the file can end in the middle of a flush: some of its
    # extents forwarded, the rest still pending.  The check that matters
    # comes below (no acknowledged write pending); the known-clean map is
    # forgotten so that the model is exact again.
    union = set().union(*(p for p, _, _ in since))
    if got <= union:
        ctl_cmd("forget-clean")
        match = (set(got), set(), dict(m["flushed"][2]))
        unpunched = set()
        which = len(since)
if match is None:
    pend, clean, _ = m["flushed"]
    want = pend | (clean & m["data_since"])
    fail(f"replayed pending set differs from the model at the last FLUSH: "
         f"{len(got)} blocks, expected {len(want)}; extra {show(got - want)}, "
         f"missing {show(want - got)}; clean_bytes {st['clean_bytes']}, "
         f"expected {len(clean - (clean & m['data_since'])) * BLOCK}"
         + (" (a FLUSH was in flight; its model does not match either)"
            if m["inflight"] else ""))
pending, clean, protected = set(match[0]), set(match[1]), dict(match[2])
if device_pid is not None:
    # Only a completed FLUSH promises data.  The records of a FLUSH in
    # flight at the cut may have reached the disk (its write-out was
    # done, its backend flush had begun) while the data it was to make
    # durable did not: kill -9 loses neither, a power cut may.
    protected = dict(m["flushed"][2])
kept = clean & m["data_since"]           # power cut: writes lost whole
for b in kept:
    if h.pread(BLOCK, b * BLOCK) != bytes(BLOCK):
        fail(f"block {b}, written after the last FLUSH, is still known clean "
             f"but does not read zeros")
for b, tag in m["flushed"][2].items():
    if m["last"].get(b) == ("w", tag) and h.pread(BLOCK, b * BLOCK) != pattern(b, tag):
        fail(f"block {b}, written and flushed, does not read back as written")
if device_pid is None:
    # kill -9: the backend kept every acknowledged write, so each one
    # is data, pending nowhere (no later discard may zero it).
    written = {b: v[1] for b, v in m["last"].items() if v[0] == "w"}
    over = sorted(set(written) & got)
    if over:
        fail(f"replay left a discard pending over {len(over)} blocks whose "
             f"last command was an acknowledged write: {show(set(over))}")
    for b, tag in written.items():
        if h.pread(BLOCK, b * BLOCK) != pattern(b, tag):
            fail(f"block {b}, written before the kill, does not read back "
                 f"as written")
    last = dict(m["last"])
else:
    # What the last FLUSH made durable is the truth now: later writes
    # may or may not have survived, so their blocks are unknown.
    last = {b: v for b, v in m["last"].items()
            if not (v[0] == "w" and protected.get(b) != v[1])}

if rnd % 10 == 0:
    before = st["forwarded_bytes"]
    h.trim(nblocks * BLOCK, 0)
    ctl_cmd("flush", "--wait")
    sent = stats()["forwarded_bytes"] - before
    want = (nblocks - len(clean)) * BLOCK
    if sent != want:
        fail(f"a TRIM of the whole disk sent {sent} bytes, expected {want} "
             f"(all but the {len(clean)} blocks known clean)")
    pending, clean, last = set(), set(range(nblocks)), {}
    h.flush()
protected = {b: v[1] for b, v in last.items() if v[0] == "w"}
flushed = (set(pending), set(clean), dict(protected))
data_since = set()


def extent():
    n = rng.choice([1, 1, 2, 4, 8, 16])
    b = rng.randrange(nblocks - n + 1)
    return b, n


def do_flush():
    global flushed, data_since, ops_since
    h.flush()
    flushed = (set(pending), set(clean),
               {b: v[1] for b, v in last.items() if v[0] == "w"})
    data_since = set()
    ops_since = []


ops_since = []


ops = rng.randrange(50, 400)
for i in range(ops):
    r = rng.random()
    b, n = extent()
    blocks = set(range(b, b + n))
    if r < 0.40:
        tag = f"{rnd}.{i}"
        h.pwrite(b"".join(pattern(x, tag) for x in range(b, b + n)), b * BLOCK)
        pending -= blocks
        clean -= blocks
        data_since |= blocks
        ops_since.append(("w", b, n))
        for x in blocks:
            last[x] = ("w", tag)
    elif r < 0.75:
        h.trim(n * BLOCK, b * BLOCK)
        pending |= blocks - clean
        ops_since.append(("t", b, n))
        for x in blocks:
            last[x] = ("t",)
    elif r < 0.82 and nbd_mode:
        h.zero(n * BLOCK, b * BLOCK)      # may trim: a hole, clean
        pending -= blocks
        clean |= blocks
        data_since -= blocks
        ops_since.append(("z", b, n))
        for x in blocks:
            last[x] = ("z",)
    elif r < 0.84:
        ctl_cmd("flush", "--wait")
        clean |= pending
        data_since -= pending
        pending = set()
        ops_since.append(("f", 0, 0))
        # discardfuse: the discardctl child closed its copy of our
        # descriptor at exec, and FUSE sends a FLUSH at every close: the
        # model follows with one of its own.
        if not nbd_mode:
            do_flush()
    elif r < 0.93 or i % 100 == 99:
        do_flush()

m = {"pending": pending, "clean": clean, "last": last,
     "data_since": data_since, "flushed": flushed, "inflight": None,
     "ops": ops_since}
if nbd_mode and rng.random() < 0.5:
    h.aio_flush()
    m["inflight"] = (set(pending), set(clean),
                     {b: v[1] for b, v in last.items() if v[0] == "w"})
    time.sleep(rng.random() * 0.004)
with open(model_path + ".tmp", "wb") as f:
    pickle.dump(m, f)
os.rename(model_path + ".tmp", model_path)
# The power cut: the device's cache goes first, so that nothing the
# server acknowledges after it can have reached stable storage.
if device_pid is not None:
    os.kill(device_pid, signal.SIGKILL)
os.kill(pid, signal.SIGKILL)
cut = "power cut" if device_pid else "kill"
print(f"round {rnd}: replay matched the sets at "
      + ("the last FLUSH" if which == 0 else
         "the FLUSH in flight" if which < len(candidates) else
         "no single moment (known-clean map forgotten)" if which == len(since)
         else f"{which - len(candidates)} commands after the last FLUSH")
      + " "
      f"({len(got)} pending blocks, "
      f"{st['journal_replayed_records']} records replayed"
      + (f"; of the blocks known clean then, {len(kept)} written since came "
         f"back clean, {len(unpunched)} not written since came back pending"
         if device_pid else "")
      + f"), {ops} commands, "
      f"{'a FLUSH in flight at' if m['inflight'] else 'nothing in flight at'} "
      f"the {cut}")
