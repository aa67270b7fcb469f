#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside a guest booted with systemd as PID 1 (tests/guest/run --init
# systemd): the units and the packages' postinst under a mounted
# filesystem (issue 37, part 4).  The packages (DEBDIR/old/*.deb) are
# installed; discardcache@up serves a file, discardcache-nbd@up attaches
# /dev/nbd0 through the keeper, XFS is mounted -o discard on it and a
# writer fsyncs files without a pause (restart-writer.py).  Then
# `systemctl restart discardcache@up` RESTARTS times; the keeper killed
# (its unit's Restart= adopts the device); an upgrade, `dpkg -i` of the
# same packages with a higher version (DEBDIR/new), under a policy-rc.d
# that forbids restarts (nothing restarts), then again without (the
# postinst restarts the server).  Checked: the server's pid changed at
# each restart and, after the upgrade, it maps the new plugin file (not
# the deleted old one); the keeper's pid changed only when it was
# killed; the writer saw no error, the kernel logged no I/O error;
# xfs_repair -n is clean and every file the writer kept is intact.
# Printed: each restart's time (systemctl's or dpkg's) and the longest
# write+fsync around it.
#
#   upgrade-guest.sh DEBDIR [RESTARTS]
source "$abs_top_srcdir/tests/functions.sh"
source "$GUEST_LIB"

debdir=$1 restarts=${2:-3}
[ "$(cat /proc/1/comm)" = systemd ] || fail "PID 1 is $(cat /proc/1/comm), not systemd (run --init systemd)"
W=/var/lib/dc-upgrade M=/mnt/up
out=$GUEST_OUT/upgrade
: > "$out.result"
exec 2> >(tee -a "$out.log" >&2)
mkdir -p $W $M

# The unit, the keeper, the mount and the writer are torn down whatever
# happens; systemd stops the units' processes (by their cgroups).
writer=
teardown ()
{
    touch $W/stop
    [ -n "$writer" ] && await_exit "$writer" writer "the stop file"
    umount_if_mounted $M
    systemctl stop discardcache-nbd@up.service discardcache@up.service
    journalctl -b --no-pager -u 'discardcache*' > "$out.journal" 2>&1
}
cleanup_fn teardown

# man-db's trigger would index the packages' man pages after each
# dpkg -i: long under TCG, and nothing here reads them.
rm -f /var/lib/man-db/auto-update
dpkg -i "$debdir"/old/*.deb > $W/install.log 2>&1 ||
    fail "dpkg -i of the packages failed: $(tail -5 $W/install.log)"
old_version=$(dpkg-query -W -f '${Version}' nbdkit-plugin-discardcache)
# An install starts nothing (debian/rules: --no-enable --no-start).
! systemctl is-active --quiet 'discardcache@*.service' || fail "the install started a server"

truncate -s 1G $W/disk.img
cat > /etc/discardcache/up.conf <<EOF
DISCARDCACHE_ARGS="backend=$W/disk.img state=/var/lib/discardcache/up.state stop-timeout=2s"
NBD_DEVICE=/dev/nbd0
NBD_ATTACH_ARGS="--connections=2 --dead-timeout=60s"
EOF
systemctl start discardcache@up.service ||
    fail "discardcache@up did not start: $(journalctl -b --no-pager -u discardcache@up | tail -5)"
systemctl start discardcache-nbd@up.service ||
    fail "discardcache-nbd@up did not start: $(journalctl -b --no-pager -u discardcache-nbd@up | tail -5)"
[ "$(cat /sys/block/nbd0/size)" -eq $(( 1 << 21 )) ] || fail "nbd0 has the wrong size"

mainpid () { systemctl show -p MainPID --value "$1"; }
keeper=$(mainpid discardcache-nbd@up.service)
[ "$keeper" -gt 0 ] || fail "discardcache-nbd@up has no main pid"
reconn0=$(dmesg | grep -c "nbd0: reconnected socket")

mkfs.xfs -q -f /dev/nbd0 || fail "mkfs.xfs failed"
mount -o discard /dev/nbd0 $M || fail "mount failed"
restart_writer () { /usr/bin/python3 "$abs_top_srcdir/tests/guest/restart-writer.py" "$@"; }
# (Not through the function: $! must be the writer itself.)
/usr/bin/python3 "$abs_top_srcdir/tests/guest/restart-writer.py" write $M $W $W/stop &
writer=$!
sleep 3

# restart HOW COMMAND...: the server restarted by COMMAND; its pid must
# change and the writer must go on.
RESTARTS=()
restart ()
{
    local how=$1 pid0 pid1 t0 t1
    shift
    pid0=$(mainpid discardcache@up.service)
    t0=$(date +%s%N)
    "$@" > $W/restart.log 2>&1 || fail "$how: $* failed: $(tail -5 $W/restart.log)"
    t1=$(date +%s%N)
    pid1=$(mainpid discardcache@up.service)
    [ "$pid1" -gt 0 ] && [ "$pid1" != "$pid0" ] ||
        fail "$how: the server's pid is $pid1, was $pid0: not restarted"
    systemctl is-active --quiet discardcache@up.service || fail "$how: the server is not active after"
    kill -0 "$writer" 2>/dev/null || fail "$how: the writer has ended"
    RESTARTS+=("$how $(( t0 / 1000000 )) $(( (t1 - t0) / 1000000 )) $pid0 $pid1")
    sleep 2
}
for (( i = 0; i < restarts; i++ )); do
    restart systemctl systemctl restart discardcache@up.service
done
# The keeper crashes (SIGKILL): Restart= starts `attach --adopt`, which
# takes the device over as it is; the restarts below go through the new
# keeper.  (The way to move the keeper to a new discardctl without
# unmounting, which discardcache's postinst tells.)
systemctl kill -s KILL discardcache-nbd@up.service
for (( i = 0; i < 300; i++ )); do
    k=$(mainpid discardcache-nbd@up.service)
    [ "$k" -gt 0 ] && [ "$k" != "$keeper" ] && systemctl is-active --quiet discardcache-nbd@up.service &&
        break
    sleep 0.1
done
[ "$k" -gt 0 ] && [ "$k" != "$keeper" ] || fail "no new keeper 30 s after the old one was killed"
[ "$(cat /sys/block/nbd0/size)" -eq $(( 1 << 21 )) ] || fail "nbd0 lost its size with its keeper"
echo "keeper killed: pid $keeper -> $k, device kept" | tee -a "$out.result"
keeper=$k
# Where policy-rc.d forbids it (exit 101: chroots, image builds, and
# this host's own container image), the upgrade restarts nothing...
cat > /usr/sbin/policy-rc.d <<'EOF'
#!/bin/sh
exit 101
EOF
chmod 0755 /usr/sbin/policy-rc.d
pid0=$(mainpid discardcache@up.service)
# (The plugin's package alone: its postinst is the one that restarts,
# and each dpkg -i is long under TCG.)
dpkg -i "$debdir"/new/nbdkit-plugin-discardcache_*.deb > $W/forbidden.log 2>&1 ||
    fail "dpkg -i under policy-rc.d failed: $(tail -5 $W/forbidden.log)"
sed 's/^/dpkg (policy-rc.d 101): /' $W/forbidden.log >&2
[ "$(mainpid discardcache@up.service)" = "$pid0" ] ||
    fail "the upgrade restarted the server although policy-rc.d forbids it"
# ...and the next one, allowed, does (a reinstall of that version runs
# the same postinst: configure with the version before).
rm -f /usr/sbin/policy-rc.d
restart upgrade dpkg -i "$debdir"/new/*.deb
sed 's/^/dpkg: /' $W/restart.log >&2
new_version=$(dpkg-query -W -f '${Version}' nbdkit-plugin-discardcache)
[ "$new_version" != "$old_version" ] || fail "the upgrade left version $old_version"
# The server that runs now loaded the new package's plugin; the one
# before it had the replaced (deleted) file mapped.
server=$(mainpid discardcache@up.service)
grep discardcache-plugin.so "/proc/$server/maps" > $W/maps || fail "the server maps no plugin"
! grep -q deleted $W/maps || fail "the server after the upgrade runs the old plugin: $(head -1 $W/maps)"
# discardcache's postinst names the keeper's unit, and leaves it alone.
grep -q "discardcache-nbd@up.service still runs the previous version" $W/restart.log ||
    fail "the upgrade did not say that the keeper keeps the old discardctl"
[ "$(mainpid discardcache-nbd@up.service)" = "$keeper" ] ||
    fail "the keeper's unit was restarted (pid $keeper, now $(mainpid discardcache-nbd@up.service))"
touch $W/stop
await_exit "$writer" writer "the stop file"
writer=

n=${#RESTARTS[@]}
reconnected=$(( $(dmesg | grep -c "nbd0: reconnected socket") - reconn0 ))
echo "$old_version -> $new_version; sockets handed to nbd0: $reconnected (2 a restart)" |
    tee -a "$out.result"
[ "$reconnected" -ge $(( 2 * n )) ] || fail "$reconnected sockets reconnected, $(( 2 * n )) expected"
for r in "${RESTARTS[@]}"; do
    read -r how at took pid0 pid1 <<< "$r"
    pause=$(restart_writer pause $W $(( at - 1000 )) $(( at + took + 3000 )))
    echo "restart by $how: server pid $pid0 -> $pid1, took $took ms, longest write+fsync $pause ms" |
        tee -a "$out.result"
done
restart_writer errors $W | tee -a "$out.result"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "the writer saw errors"
dmesg > "$out.dmesg"
# ("Dead connection, failed to find a fallback" is not one: with the
# keeper's dead-connection timeout the kernel holds the request and
# sends it again on the new connections.)
! grep -Ei "I/O error|xfs.*(shut|corrupt)" "$out.dmesg" ||
    fail "the kernel logged errors (above)"

umount $M || fail "umount failed"
xfs_repair -n /dev/nbd0 > $W/fsck.log 2>&1 || fail "xfs_repair -n: $(tail -5 $W/fsck.log)"
mount /dev/nbd0 $M || fail "mount again failed"
restart_writer verify $M $W | tee -a "$out.result"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "files lost or damaged"
umount $M || fail "the last umount failed"
systemctl stop discardcache-nbd@up.service discardcache@up.service ||
    fail "systemctl stop failed"
[ "$(cat /sys/block/nbd0/size)" -eq 0 ] || fail "nbd0 is still connected after the stop"
echo "upgrade: ok" | tee -a "$out.result"
