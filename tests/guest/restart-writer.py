#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# The writer of tests/guest/restart-keeper.sh and upgrade-guest.sh:
# files written and fsync'd without a pause, an older one deleted now and
# then (the filesystem's discards reach the server), until STOPFILE
# appears.  It logs each operation's start and duration, each error, and
# the files it knows to be on disk; verify mode checks them, errors mode
# counts (and fails on) errors, pause mode prints the longest
# write+fsync (ms) that began between FROM_MS and TO_MS (since the epoch).
#
#   restart-writer.py write DIR LOGDIR STOPFILE
#   restart-writer.py verify DIR LOGDIR
#   restart-writer.py errors LOGDIR
#   restart-writer.py pause LOGDIR FROM_MS TO_MS
import hashlib, os, sys, time

KEEP = 60          # files kept; older ones deleted


def content(i):
    return hashlib.sha256(b"%d" % i).digest() * 512       # 16 KiB


def write(d, logdir, stopfile):
    lat = open(os.path.join(logdir, "latency"), "w")
    errs = open(os.path.join(logdir, "errors"), "w")
    i = 0
    while not os.path.exists(stopfile):
        t0 = time.time()
        try:
            fd = os.open(os.path.join(d, "f%d" % i),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, content(i))
            os.fsync(fd)
            os.close(fd)
            if i >= KEEP:
                os.unlink(os.path.join(d, "f%d" % (i - KEEP)))
            if i % 8 == 0:
                dfd = os.open(d, os.O_RDONLY)
                os.fsync(dfd)
                os.close(dfd)
        except OSError as e:
            errs.write("%d %s\n" % (i, e))
            errs.flush()
        lat.write("%.3f %.3f\n" % (t0, time.time() - t0))
        lat.flush()
        i += 1
    with open(os.path.join(logdir, "count"), "w") as f:
        f.write("%d\n" % i)


def verify(d, logdir):
    n = int(open(os.path.join(logdir, "count")).read())
    bad = 0
    for i in range(max(0, n - KEEP), n):
        try:
            with open(os.path.join(d, "f%d" % i), "rb") as f:
                ok = f.read() == content(i)
        except OSError:
            ok = False
        if not ok:
            print("f%d: missing or wrong" % i)
            bad += 1
    print("verified %d files, %d bad" % (min(n, KEEP), bad))
    return 1 if bad else 0


def errors(logdir):
    ops = sum(1 for _ in open(os.path.join(logdir, "latency")))
    errs = open(os.path.join(logdir, "errors")).read().splitlines()
    print("writer: %d write+fsync, %d errors" % (ops, len(errs)))
    for e in errs[:5]:
        print("writer error: " + e)
    return 1 if errs else 0


def pause(logdir, t0, t1):
    longest = 0.0
    for line in open(os.path.join(logdir, "latency")):
        start, took = map(float, line.split())
        if int(t0) <= start * 1000 <= int(t1):
            longest = max(longest, took)
    print("%d" % (longest * 1000))


if sys.argv[1] == "write":
    write(*sys.argv[2:5])
elif sys.argv[1] == "errors":
    sys.exit(errors(sys.argv[2]))
elif sys.argv[1] == "pause":
    pause(*sys.argv[2:5])
else:
    sys.exit(verify(*sys.argv[2:4]))
