#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Write the guest harness's initramfs (an uncompressed newc cpio archive).

  mkinitramfs.py OUT INIT BUSYBOX MODULES_DIR

The archive holds /init (INIT), /bin/busybox (BUSYBOX, statically linked)
with a link for each of its applets, /modules/* (the files MODULES_DIR/order
lists, and order itself) and /dev/console: written here, not with cpio(1),
so that a device node needs no root.
"""
import os
import stat
import subprocess
import sys


class Cpio:
    def __init__(self, f):
        self.f, self.ino = f, 1000

    def entry(self, name, mode, data=b"", rdev=(0, 0)):
        self.ino += 1
        name_b = name.encode() + b"\0"
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0,
                  rdev[0], rdev[1], len(name_b), 0]
        hdr = b"070701" + b"".join(b"%08X" % v for v in fields)
        self.f.write(hdr + name_b)
        self.f.write(b"\0" * (-(len(hdr) + len(name_b)) % 4))
        self.f.write(data)
        self.f.write(b"\0" * (-len(data) % 4))

    def dir(self, name):
        self.entry(name, stat.S_IFDIR | 0o755)

    def file(self, name, data, mode=0o644):
        self.entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name, target):
        self.entry(name, stat.S_IFLNK | 0o777, target.encode())

    def trailer(self):
        self.entry("TRAILER!!!", 0)


def main():
    out, init, busybox, modules = sys.argv[1:5]
    applets = subprocess.run([busybox, "--list"], capture_output=True,
                             text=True, check=True).stdout.split()
    order = open(os.path.join(modules, "order")).read().split()
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        c = Cpio(f)
        for d in ("bin", "dev", "proc", "sys", "modules"):
            c.dir(d)
        c.entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))
        c.file("init", open(init, "rb").read(), 0o755)
        c.file("bin/busybox", open(busybox, "rb").read(), 0o755)
        for a in applets:
            if a != "busybox":
                c.symlink("bin/" + a, "busybox")
        for m in order:
            c.file("modules/" + m, open(os.path.join(modules, m), "rb").read())
        c.file("modules/order", ("\n".join(order) + "\n").encode())
        c.trailer()
    os.rename(tmp, out)


if __name__ == "__main__":
    main()
