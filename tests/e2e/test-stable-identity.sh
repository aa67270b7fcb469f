#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: saved state follows the disk, not its number (issue 35,
# item 4; invariant 4).  A block device backend's state file is tied to
# the name sysfs gives the store (here a loop device's backing file; a
# disk's WWID or serial, a dm uuid: backend/stable-id.c), so the same
# store at another device number (a reboot that renumbers disks) keeps
# its pending set, and another store at the same number is refused.  And
# a second server on a busy disk is told who holds it: the first
# server's pid, named as a discardcache.  Real loop devices of the
# test's own (loop_create): root and /dev/loop-control needed.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
requires_root
requires_loop
requires "$NBDKIT" --version
requires /usr/bin/python3 -c 'import nbd'

mktempdir
dir=$TESTDIR
state=$dir/state
loop_create || fail "cannot create a loop device"
first=$LOOP_OWN
loop_create || fail "cannot create a second loop device"
second=$LOOP_OWN
truncate -s 64M "$dir/disk" "$dir/other"

# start_dc NAME DEV KEY=VALUE...: the plugin on DEV with state=$state.
start_dc ()
{
    local name=$1 dev=$2
    shift 2
    rm -f "$dir/$name.pid" "$dir/$name.sock"
    start_nbdkit -P "$dir/$name.pid" -U "$dir/$name.sock" "$PLUGIN" \
        backend="$dev" state="$state" ctl="$dir/$name.ctl" journal=off \
        delay=1h statsfile="$dir/$name.json" "$@" 2>"$dir/$name.log"
    wait_for_ctl "$dir/$name.ctl"
}
stop_dc () { stop_pidfile "$dir/$1.pid" nbdkit; }
dump () { "$DISCARDCTL" -s "$dir/$1.ctl" dump | cut -d' ' -f1,2; }

attach_loop "$dir/disk" "$first" || fail "cannot attach $first"
start_dc a "$first"
/usr/bin/python3 - "$dir/a.sock" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
for i in range(16):
    h.trim(1 << 20, i * (4 << 20))
h.shutdown()
PY
dump a >"$dir/a.pending"
[ "$(wc -l <"$dir/a.pending")" -eq 16 ] || fail "expected 16 pending extents"
stop_dc a
[ -s "$state" ] || fail "no state file after a clean stop"
detach_loop "$first" || fail "cannot detach $first"

# The same store at another number: loaded whole.
attach_loop "$dir/disk" "$second" || fail "cannot attach $second"
start_dc b "$second"
dump b >"$dir/b.pending"
cmp -s "$dir/a.pending" "$dir/b.pending" ||
    fail "the pending set did not follow the disk from $first to $second"

# A second server on the busy disk: who holds it.
pid=$(cat "$dir/b.pid")
rm -f "$dir/c.sock"
if "$NBDKIT" -U "$dir/c.sock" "$PLUGIN" backend="$second" 2>"$dir/c.log"; then
    fail "a second server started on $second"
fi
grep -qF "open exclusively by pid $pid (nbdkit, discardcache)" "$dir/c.log" ||
    { cat "$dir/c.log"; fail "the refusal does not name the holder, pid $pid"; }
stop_dc b
detach_loop "$second" || fail "cannot detach $second"

# Another store at the first number: refused, nothing applied.
attach_loop "$dir/other" "$first" || fail "cannot attach $first"
start_dc d "$first"
grep "refused, nothing applied: " "$dir/d.log" | grep -qF "saved for another blkdev (loop:$dir/disk)" ||
    { cat "$dir/d.log"; fail "another store's state was not refused by name"; }
[ "$(ctl_stat "$dir/d.ctl" pending_extents)" -eq 0 ] ||
    fail "another store got the pending set"
stop_dc d
echo "stable identity: ok (the pending set followed the disk from $first to $second)"
