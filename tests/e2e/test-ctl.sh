#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the control socket of the plugin running under nbdkit,
# spoken to directly (python sockets): every command; malformed input
# (binary garbage, a 1 MiB line, half a line then close, unknown
# commands, bad set values) answered with an error while the server
# keeps serving and holds no more descriptors than before; the client
# bound; concurrent clients while a libnbd client writes, trims and
# checks its data; and a stop while a client waits for a flush.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'

mktempdir
dir=$TESTDIR
truncate -s 64M "$dir/disk"
start_nbdkit -P "$dir/pid" -U "$dir/nbd.sock" "$PLUGIN" backend="$dir/disk" \
    delay=1h ctl="$dir/ctl.sock" 2>"$dir/log"
pid=$(cat "$dir/pid")
wait_for_ctl "$dir/ctl.sock"
[ -S "$dir/ctl.sock" ] || fail "$dir/ctl.sock is not a socket"
[ "$(stat -c %a "$dir/ctl.sock")" = 600 ] || fail "control socket mode is not 0600"

timeout 600 /usr/bin/python3 - "$dir" "$pid" <<'PY' || fail "control protocol"
import json, os, random, socket, sys, threading, time, nbd
d, pid = sys.argv[1], int(sys.argv[2])
sock = d + "/ctl.sock"

def fds():
    return len(os.listdir("/proc/%d/fd" % pid))

class Ctl:
    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(30)
        self.s.connect(sock)
        self.f = self.s.makefile("rb")
        self.hello = json.loads(self.f.readline())
        assert self.hello["ok"] and self.hello["hello"] == "discardcache", self.hello
        assert self.hello["protocol"] == 1 and self.hello["max_line"] == 4096
    def send(self, data):
        self.s.sendall(data)
    def reply(self):
        """Lines up to and including the one with "ok"."""
        lines = []
        while True:
            assert len(lines) < 100000, "a reply without end"
            line = self.f.readline()
            assert line.endswith(b"\n"), "connection closed mid-reply: %r" % line
            o = json.loads(line)
            lines.append(o)
            if "ok" in o:
                return lines
    def ask(self, req):
        self.send(req.encode() + b"\n")
        return self.reply()
    def close(self):
        self.f.close(); self.s.close()

def ok(c, req):
    r = c.ask(req)
    assert r[-1]["ok"] is True, (req, r[-1])
    return r

def error(c, req, says):
    r = c.ask(req) if isinstance(req, str) else (c.send(req), c.reply())[1]
    assert r[-1]["ok"] is False and says in r[-1]["error"], (req, r[-1])

h = nbd.NBD()
h.connect_unix(d + "/nbd.sock")
h.pwrite(b"\xaa" * (1 << 20), 0)
for i in range(10):
    h.trim(16384, i * 65536)
h.trim(1000, 900000)                     # a sub-granule fragment

# Every command.
c = Ctl()
st = ok(c, "stats")[-1]
assert st["trims"] == 11 and st["pending_extents"] == 11, st
assert st["version"] == 1 and st["paused"] is False
dump = ok(c, "dump")
assert [(x["offset"], x["length"]) for x in dump[:-1]] == \
    [(i * 65536, 16384) for i in range(10)] + [(900000, 1000)], dump
assert all(0 <= x["age_ms"] < 60000 for x in dump[:-1])
assert dump[-1]["extents"] == 11 and dump[-1]["bytes"] == 10 * 16384 + 1000
assert ok(c, "pause")[-1]["paused"] is True
assert ok(c, "stats")[-1]["paused"] is True
assert ok(c, "resume")[-1]["paused"] is False
r = ok(c, "set delay=2h")
assert r == [{"ok": True, "set": "delay", "value": "2h"}], r
ok(c, "set minlen=64k"); ok(c, "set idle=10ms"); ok(c, "set rate=0")
# Several pairs: a line each, in order, the last with "ok"; all checked
# before any is applied (budget shows in the statistics).
r = ok(c, "set budget=3ms rate=0 idle=10ms")
assert r == [{"set": "budget", "value": "3ms"}, {"set": "rate", "value": "0"},
             {"ok": True, "set": "idle", "value": "10ms"}], r
assert ok(c, "stats")[-1]["budget_us"] == 3000
for req, says in [("set budget=7ms delay=soon", "set delay=soon: invalid value"),
                  ("set budget=7ms foo=bar", "set foo: unknown key"),
                  ("set budget=7ms max-extents=5", "set max-extents: cannot be changed while running"),
                  ("set budget=7ms budget=8ms", "budget given twice")]:
    error(c, req, says)
    assert ok(c, "stats")[-1]["budget_us"] == 3000, req
ok(c, "set budget=off")
assert ok(c, "stats")[-1]["budget_us"] == 0
assert "stats" in ok(c, "help")[-1]["commands"]
r = ok(c, "flush --wait --progress")
assert r[-1]["flush"] == "done" and r[-1]["forwarded_bytes"] == 10 * 16384, r
assert r[-1]["pending_bytes"] == r[-1]["subgranule_bytes"] == 1000, r
h.trim(65536, 1 << 20)
r = ok(c, "flush")[-1]
assert r["flush"] == "started" and r["total_bytes"] == 65536, r
for _ in range(100):
    if ok(c, "stats")[-1]["pending_bytes"] == 1000:
        break
    time.sleep(0.05)
else:
    raise AssertionError("flush without --wait did not forward")
# Invariant 9: what went out is known clean; the same TRIMs again are
# acknowledged and counted, not sent.  forget-clean forgets it all.
h.trim(65536, 1 << 20)
for i in range(10):
    h.trim(16384, i * 65536)
st = ok(c, "stats")[-1]
assert st["already_clean_bytes"] == 65536 + 10 * 16384, st
assert st["pending_bytes"] == 1000 and st["clean_extents"] == 11, st
r = ok(c, "forget-clean")[-1]
assert r["forgot_extents"] == 11 and r["forgot_bytes"] == 65536 + 10 * 16384, r
assert r["max_clean_extents"] == 1 << 20, r
assert ok(c, "stats")[-1]["clean_extents"] == 0
h.trim(65536, 1 << 20)
assert ok(c, "stats")[-1]["pending_bytes"] == 65536 + 1000
ok(c, "flush --wait")
# Bad values and unknown commands: an error, the connection goes on.
error(c, "set delay=soon", "expected a duration")
error(c, "set minlen=-1", "expected a size")
error(c, "set rate=fast", "whole number")
error(c, "set backend=/etc/passwd", "cannot be changed while running")
error(c, "set foo=bar", "set foo: unknown key: the keys that can be changed "
      "while running are delay, minlen, idle, rate and budget")
error(c, "set budget=soon", "expected off, or a duration")
error(c, "set delay", "KEY=VALUE")
error(c, "frobnicate", "unknown command 'frobnicate'")
error(c, "stats please", "takes no arguments")
error(c, "forget-clean all", "takes no arguments")
error(c, "flush --now", "unknown option")
error(c, "", "empty request")
st = ok(c, "stats")[-1]
c.close()
time.sleep(0.3)

# Malformed input, each on a fresh connection; afterwards the server
# holds exactly the descriptors it held before.
before = fds()
rnd = random.Random(4)
for _ in range(20):
    c = Ctl()
    # Binary garbage in lines shorter than the limit: an error a line.
    lines = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200))).replace(b"\n", b"")
             for _ in range(5)]
    for line in lines:
        c.send(line + b"\n")
        r = c.reply()
        assert r[-1]["ok"] is False, r
    ok(c, "stats")
    c.close()
# NUL bytes and a carriage return.
c = Ctl()
error(c, b"stats\x00dump\n", "0x00")
ok(c, "stats\r")
c.close()
# A 1 MiB line: an error, then the server closes.
c = Ctl()
try:
    c.send(b"a" * (1 << 20))
except (BrokenPipeError, ConnectionResetError):
    pass
line = c.f.readline()
assert b"longer than 4096" in line, line
try:
    assert c.f.readline() == b""
except ConnectionResetError:
    pass
c.close()
# Half a line, then close; and a close before even the hello is read.
for data in [b"sta", b"", b"flush --wa"]:
    s = socket.socket(socket.AF_UNIX); s.connect(sock); s.sendall(data); s.close()
# Pipelined requests in one write are answered in order.
c = Ctl()
c.send(b"stats\npause\nresume\nbogus\nstats\n")
answers = [c.reply()[-1] for _ in range(5)]
assert [a["ok"] for a in answers] == [True, True, True, False, True], answers
assert answers[1]["paused"] is True and answers[2]["paused"] is False
c.close()
# The 17th client at once is told the server is busy; the 16 are served.
# First the server must have seen the clients above hang up (under load
# it may not have yet, and a slot still held makes the 16th busy).
deadline = time.time() + 30
while fds() != before and time.time() < deadline:
    time.sleep(0.05)
many = [Ctl() for _ in range(16)]
s = socket.socket(socket.AF_UNIX); s.connect(sock)
busy = s.makefile("rb").readline()
assert b"busy" in busy and b'"ok":false' in busy, busy
s.close()
for c in many:
    ok(c, "stats")
for c in many:
    c.close()
time.sleep(0.5)
assert fds() == before, "descriptors: %d before, %d after" % (before, fds())
c = Ctl(); ok(c, "stats"); c.close()

# Concurrent clients while a libnbd client writes, trims and checks.
errors = []
stop = threading.Event()
def io():
    try:
        r = random.Random(7)
        for n in range(400):
            blk = r.randrange(256)
            data = bytes([n % 251 + 1]) * 4096
            h.pwrite(data, blk * 65536)
            h.trim(32768, blk * 65536 + 8192)
            h.pwrite(data, blk * 65536 + 16384)
            assert h.pread(4096, blk * 65536) == data
            assert h.pread(4096, blk * 65536 + 16384) == data
    except Exception as e:
        errors.append("io: %r" % e)
    finally:
        stop.set()
def client(k):
    try:
        c = Ctl()
        rounds = 0
        while not stop.is_set() or rounds < 3:
            ok(c, ["stats", "dump", "flush --wait", "flush --wait --progress"][(k + rounds) % 4])
            rounds += 1
        c.close()
    except Exception as e:
        errors.append("client %d: %r" % (k, e))
threads = [threading.Thread(target=io)] + [threading.Thread(target=client, args=(k,)) for k in range(8)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
h.shutdown()
print("control protocol: ok")
PY

# The refusals and bad requests reached the server's log (nbdkit -f
# logs errors to stderr; the bad set values are reported there).
grep -q "delay=soon" "$dir/log" || fail "a bad set value was not logged"

# A stop while a client waits for a flush of slow discards: the client
# hears that the server is stopping and nbdkit exits (stop_pid fails
# the test if it takes 60 s).
requires "$NBDKIT" --filter=delay null --dump-plugin
start_nbdkit -P "$dir/dev.pid" -U "$dir/dev.sock" --filter=delay memory 64M \
    delay-trim=300ms
start_nbdkit -P "$dir/pid2" -U "$dir/nbd2.sock" "$PLUGIN" \
    backend="nbd+unix:///?socket=$dir/dev.sock" delay=1h ctl="$dir/ctl2.sock"
wait_for_ctl "$dir/ctl2.sock"
timeout 300 /usr/bin/python3 - "$dir" <<'PY' || fail "stop during a flush"
import json, os, signal, socket, sys, time, nbd
d = sys.argv[1]
h = nbd.NBD(); h.connect_unix(d + "/nbd2.sock")
for i in range(12):
    h.trim(65536, i * (1 << 20))
h.shutdown()
s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(d + "/ctl2.sock")
f = s.makefile("rb"); f.readline()
s.sendall(b"flush --wait --progress\n")
progress = [json.loads(f.readline()) for _ in range(3)]
assert all(p.get("progress") for p in progress), progress
assert progress[-1]["total_bytes"] == 12 * 65536, progress
t0 = time.time()
os.kill(int(open(d + "/pid2").read()), signal.SIGTERM)
final = None
for line in f:
    o = json.loads(line)
    if "ok" in o:
        final = o
        break
# Told, or at least disconnected (EOF) rather than left hanging.
assert final is None or final["ok"] is False and "stopping" in final["error"], final
print("stop during flush: client released after %.1f s" % (time.time() - t0))
PY
stop_pidfile "$dir/pid2" nbdkit
[ ! -e "$dir/ctl2.sock" ] || fail "control socket left behind after stop"
echo "ctl: ok"
