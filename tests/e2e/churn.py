#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""File churn on a mounted filesystem, for discardcache's end-to-end tests.

  churn.py run DIR MANIFEST [--seed N] [--rounds R] [--files F] [--max-kib K]
                           [--min-kib K] [--delete D]
  churn.py verify DIR MANIFEST

run: each round creates F files of mixed sizes (4 KiB to K KiB, random
content), fsyncs them, then deletes about half of the files alive, so the
filesystem frees (and with -o discard, trims) space that later rounds write
again.  With --min-kib the sizes are uniform from that to --max-kib
instead; with --delete, D files alive are deleted each round instead of
half.  The SHA-256 of every surviving file goes to MANIFEST.  It prints
how many runs the last round's deleted files form in the order the files
were written: nothing writes after them, so a device that keeps each file
whole, in that order, still receives at least that many discards at the
end (the deletion picks at random, so no placement chosen before it does
better on average; docs/design-notes.md, "Thin mode").
verify: every file in MANIFEST exists with its checksum; exits 1 otherwise.
Deterministic for a given seed.
"""
import argparse
import hashlib
import json
import os
import random
import sys


def write_file(path, size, rng):
    data = rng.randbytes(size)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return hashlib.sha256(data).hexdigest()


def deleted_runs(written, gone):
    """Maximal runs of gone files among written (in the order written)."""
    runs, last = 0, False
    for name in written:
        now = name in gone
        runs += now and not last
        last = now
    return runs


def run(args):
    rng = random.Random(args.seed)
    alive = {}
    serial = 0
    last_runs = last_gone = 0
    for _ in range(args.rounds):
        for _ in range(args.files):
            # Mostly small files, a few large ones, as on a real system.
            if args.min_kib:
                kib = rng.randint(args.min_kib, args.max_kib)
            else:
                kib = rng.choice([4, 8, 16, 64, 128]) if rng.random() < 0.8 \
                    else rng.randint(256, args.max_kib)
            name = "f%06d" % serial
            serial += 1
            alive[name] = write_file(os.path.join(args.dir, name), kib * 1024, rng)
        gone = len(alive) // 2 if args.delete is None else min(args.delete, len(alive))
        doomed = rng.sample(sorted(alive), gone)
        # Names sort in the order written.
        last_runs, last_gone = deleted_runs(sorted(alive), set(doomed)), gone
        for name in doomed:
            os.unlink(os.path.join(args.dir, name))
            del alive[name]
        os.sync()
    with open(args.manifest, "w") as f:
        json.dump(alive, f)
    print("churn: %d files written, %d alive" % (serial, len(alive)))
    print("churn: the last round deleted %d files, %d runs in the order written"
          % (last_gone, last_runs))


def verify(args):
    with open(args.manifest) as f:
        alive = json.load(f)
    bad = 0
    for name, digest in sorted(alive.items()):
        path = os.path.join(args.dir, name)
        try:
            with open(path, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except OSError as e:
            print("verify: %s: %s" % (path, e), file=sys.stderr)
            bad += 1
            continue
        if got != digest:
            print("verify: %s: checksum mismatch" % path, file=sys.stderr)
            bad += 1
    print("verify: %d files checked, %d bad" % (len(alive), bad))
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["run", "verify"])
    p.add_argument("dir")
    p.add_argument("manifest")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--files", type=int, default=60)
    p.add_argument("--max-kib", type=int, default=2048)
    p.add_argument("--min-kib", type=int, default=0)
    p.add_argument("--delete", type=int, default=None)
    args = p.parse_args()
    if args.mode == "run":
        run(args)
        return 0
    return verify(args)


if __name__ == "__main__":
    sys.exit(main())
