#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A writer that fsyncs, for discardublk's restart tests.

  ublk-writer.py DIR MANIFEST STOPFILE

Until STOPFILE exists: write a file of 4 to 256 KiB of random content,
fsync it and its directory, and now and then delete an older one (so the
file system trims).  Every I/O error ends it with status 1 at once, naming
the error.  At the end, the SHA-256 of every file alive goes to MANIFEST
(tests/e2e/churn.py verify checks it) and the counts to stdout.
"""
import hashlib
import json
import os
import random
import sys
import time


def write_one(path, rng):
    data = rng.randbytes(rng.randint(1, 64) * 4096)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return hashlib.sha256(data).hexdigest()


def main():
    d, manifest, stop = sys.argv[1:4]
    rng = random.Random(38)
    alive, n, deleted = {}, 0, 0
    os.makedirs(d, exist_ok=True)
    dfd = os.open(d, os.O_RDONLY)
    start = time.monotonic()
    try:
        while not os.path.exists(stop):
            name = "f%06d" % n
            alive[name] = write_one(os.path.join(d, name), rng)
            os.fsync(dfd)
            n += 1
            if n % 4 == 0 and len(alive) > 8:
                victim = rng.choice(sorted(alive))
                os.unlink(os.path.join(d, victim))
                del alive[victim]
                deleted += 1
    except OSError as e:
        print("ublk-writer: error after %d files, %.1f s: %s" %
              (n, time.monotonic() - start, e), file=sys.stderr)
        sys.exit(1)
    with open(manifest, "w") as f:
        json.dump(alive, f)
    print("written %d deleted %d alive %d in %.1f s" %
          (n, deleted, len(alive), time.monotonic() - start))


main()
