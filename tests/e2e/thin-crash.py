#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: one round of the thin-mode crash test (test-thin-crash.sh).
# Checks every slot whose content is known against the expected image
# (data and mapping: a known-zero slot is a hole), then writes and trims
# slots with patterns unique to (slot, round), flushes, records what is
# now durable, and leaves more writes and trims unflushed for the kill.
#
# usage: thin-crash.py SOCKET STATEDIR ROUND SLOTS SLOT_SIZE
import errno
import os
import pickle
import random
import struct
import sys

import nbd

sock, statedir, rnd, nslots, slot = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
state_path = os.path.join(statedir, "expected.pickle")
if os.path.exists(state_path):
    with open(state_path, "rb") as f:
        expected, known, holes = pickle.load(f)
else:
    expected = {}                   # slot -> bytes (full slot)
    known = set(range(nslots))      # slots whose content is certain
    holes = set(range(nslots))      # known slots that must be unmapped

h = nbd.NBD()
h.add_meta_context("base:allocation")
h.connect_unix(sock)
assert h.get_size() == nslots * slot, h.get_size()

zeros = bytes(slot)
mapped = {}
end = [0]
def record(metacontext, offset, entries, err):
    for i in range(0, len(entries), 2):
        length, flags = entries[i], entries[i + 1]
        for s in range(offset // slot, (offset + length) // slot):
            mapped[s] = not (flags & nbd.STATE_HOLE)
        offset += length
    end[0] = offset
    return 0

while end[0] < nslots * slot:
    h.block_status(nslots * slot - end[0], end[0], record)

bad = 0
for s in sorted(known):
    got = h.pread(slot, s * slot)
    want = expected.get(s, zeros)
    if got != want:
        first = next(i for i in range(slot) if got[i] != want[i])
        print("round %d: slot %d differs at byte %d: %r, expected %r"
              % (rnd, s, first, got[first:first + 8], want[first:first + 8]))
        bad += 1
    if s in holes and mapped.get(s, False):
        print("round %d: slot %d is mapped, expected a hole" % (rnd, s))
        bad += 1
    if s not in holes and not mapped.get(s, True):
        print("round %d: slot %d is a hole, expected mapped" % (rnd, s))
        bad += 1
# A slot whose content is uncertain (changed after the last flush) may
# hold any of its own versions or zeros, never another slot's data nor
# the backend's stale bytes.
for s in sorted(set(range(nslots)) - known):
    got = h.pread(slot, s * slot)
    for i in range(0, slot, 8):
        w = got[i:i + 8]
        if w != bytes(8) and struct.unpack("<II", w)[0] != s:
            print("round %d: slot %d (uncertain) holds foreign data at byte "
                  "%d: %r" % (rnd, s, i, w))
            bad += 1
            break
if bad:
    sys.exit("round %d: %d problems after the restart" % (rnd, bad))
print("round %d: %d known slots checked (%d holes)" % (rnd, len(known), len(holes & known)))

rng = random.Random(rnd)
def pattern(s, n):
    return (struct.pack("<II", s, rnd) * (n // 8 + 1))[:n]

def ops(count):
    touched = []
    for _ in range(count):
        s = rng.randrange(nslots)
        r = rng.random()
        try:
            op(s, r)
        except nbd.Error as e:
            # The pool is full (thin size is twice the backend's): the
            # write failed and the slot may hold anything.
            if e.errnum != errno.ENOSPC:
                raise
            known.discard(s)
            enospc[0] += 1
        touched.append(s)
    return touched

enospc = [0]
def op(s, r):
    if r < 0.4:
        data = pattern(s, slot)
        h.pwrite(data, s * slot)
        expected[s] = data
        holes.discard(s)
        known.add(s)
    elif r < 0.55:
        # Part of a slot: a new slot reads as zeros around it.  In a
        # slot whose content is unknown, the rest stays unknown.
        off = rng.randrange(0, slot, 512)
        n = rng.randrange(512, slot - off + 1, 512)
        base = bytearray(expected.get(s, zeros))
        base[off:off + n] = pattern(s, n)
        h.pwrite(bytes(base[off:off + n]), s * slot + off)
        expected[s] = bytes(base)
        holes.discard(s)
    else:
        h.trim(slot, s * slot)
        expected.pop(s, None)
        holes.add(s)
        known.add(s)

ops(300)
h.flush()
with open(state_path + ".tmp", "wb") as f:
    pickle.dump((expected, known, holes), f)
os.replace(state_path + ".tmp", state_path)

# Not flushed: anything may come of these slots.
for s in ops(100):
    known.discard(s)
with open(state_path + ".tmp", "wb") as f:
    pickle.dump((expected, known, holes), f)
os.replace(state_path + ".tmp", state_path)
print("round %d: done, %d slots known, %d writes failed with ENOSPC"
      % (rnd, len(known), enospc[0]))
