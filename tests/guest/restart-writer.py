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
# Between two files it answers a check that restart-keeper.sh asks for
# after each restart (LOGDIR/check.req, answered in LOGDIR/check.out):
# it is the writer that asks, because it alone knows which files are
# on disk at that moment, so the check races with no unlink.  Every
# file is read with O_DIRECT: a buffered read would be answered from
# the page cache, which still holds what was written, and would never
# see a replayed discard's zeros on the device.  "control" first writes
# zeros over the oldest file's blocks in IMAGE (the backend behind
# /dev/nbd0, which maps it one to one), behind the filesystem and the
# server, as a replayed discard would: the check must then name exactly
# that file, or it is blind.  The next file's unlink removes it.
#
#   restart-writer.py write DIR LOGDIR STOPFILE IMAGE
#   restart-writer.py verify DIR LOGDIR
#   restart-writer.py errors LOGDIR
#   restart-writer.py pause LOGDIR FROM_MS TO_MS
# (IMAGE may be left out by a caller that asks for no check.)
import fcntl, hashlib, mmap, os, struct, sys, time

KEEP = 60          # files kept; older ones deleted
SIZE = 16384


def content(i):
    # Each file its own pattern: a block of another file in its place
    # is caught too, not only zeros.
    return hashlib.sha256(b"%d" % i).digest() * (SIZE // 32)


def read_direct(path):
    buf = mmap.mmap(-1, SIZE + 4096)        # page-aligned, as O_DIRECT wants
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        n = os.readv(fd, [buf])
    finally:
        os.close(fd)
    return buf[:n]


def check(d, first, n):
    """The files first..n-1 read back from the device: the bad ones."""
    bad = []
    for i in range(first, n):
        try:
            ok = read_direct(os.path.join(d, "f%d" % i)) == content(i)
        except OSError:
            ok = False
        if not ok:
            bad.append(i)
    return bad


FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 1
# Unknown, delalloc, encoded, not aligned, inline, tail: no plain
# device offset to write to.
FIEMAP_NOT_PLAIN = 0x2 | 0x4 | 0x8 | 0x100 | 0x200 | 0x400


def extents(path):
    """(physical, length) of each extent of path, from FIEMAP."""
    count = 16
    buf = bytearray(struct.pack("=QQIIII", 0, 2**64 - 1, FIEMAP_FLAG_SYNC, 0,
                                count, 0) + bytes(56 * count))
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
    finally:
        os.close(fd)
    out = []
    for k in range(struct.unpack_from("=I", buf, 20)[0]):
        _, physical, length = struct.unpack_from("=QQQ", buf, 32 + 56 * k)
        flags = struct.unpack_from("=I", buf, 32 + 56 * k + 40)[0]
        if flags & FIEMAP_NOT_PLAIN:
            raise OSError("extent flags 0x%x" % flags)
        out.append((physical, length))
    return out


def zero_in_image(path, image):
    """Zeros over path's blocks in the backend image; bytes written."""
    fd = os.open(image, os.O_WRONLY)
    total = 0
    try:
        for physical, length in extents(path):
            os.pwrite(fd, bytes(length), physical)
            total += length
    finally:
        os.close(fd)
    return total


def answer(d, logdir, image, n):
    req = os.path.join(logdir, "check.req")
    mode = open(req).read().strip()
    # Gone before the answer appears: the next request is never lost.
    os.unlink(req)
    first = max(0, n - KEEP)
    lines = []
    if mode == "control":
        try:
            lines.append("zeroed f%d %d" % (first, zero_in_image(
                os.path.join(d, "f%d" % first), image)))
        except OSError as e:
            lines.append("cannot zero f%d: %s" % (first, e))
    bad = check(d, first, n)
    lines += ["bad f%d" % i for i in bad]
    lines.append("checked %d files, %d bad" % (n - first, len(bad)))
    tmp = os.path.join(logdir, "check.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(tmp, os.path.join(logdir, "check.out"))


def write(d, logdir, stopfile, image=None):
    lat = open(os.path.join(logdir, "latency"), "w")
    errs = open(os.path.join(logdir, "errors"), "w")
    req = os.path.join(logdir, "check.req")
    i = 0
    while not os.path.exists(stopfile):
        if os.path.exists(req):
            answer(d, logdir, image, i)
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
    bad = check(d, max(0, n - KEEP), n)
    for i in bad:
        print("f%d: missing or wrong" % i)
    print("verified %d files, %d bad" % (min(n, KEEP), len(bad)))
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
    write(*sys.argv[2:6])
elif sys.argv[1] == "errors":
    sys.exit(errors(sys.argv[2]))
elif sys.argv[1] == "pause":
    pause(*sys.argv[2:5])
else:
    sys.exit(verify(*sys.argv[2:4]))
