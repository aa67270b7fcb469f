#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The systemd units: `systemd-analyze verify` on them as installed (make
# install DESTDIR=..., the paths in them pointed into that tree, the man
# pages they cite found there) says nothing.  Then, since no systemd runs
# here, their command lines run as systemd would run them (words split as
# systemd splits them, %i and /run/discardcache pointed at a scratch
# directory, the example configuration's variables):
# - discardcache@: nbdkit in the foreground, discardctl on its socket;
# - discardfuse@ then discardfuse-loop@: mounted, the loop device on
#   MOUNTPOINT/disk with direct I/O, data through it, then stopped in
#   order (loop detached, then discardfuse) with a clean unmount;
# - discardublk@ (where built): its ExecStart's helper picks --recover
#   only when the device is there (no ublk here: the message, exit 1);
# - discardcache-prometheus: a file a server, labelled, mode 0644, no
#   temporary file left, clean under promtool, served by node-exporter's
#   textfile collector without error; the file of a server that stopped
#   is removed.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/packaging/install-lib.sh"
requires systemd-analyze --version
requires make --version
requires promtool --version
requires "$NBDKIT" --version

mktempdir
T=$TESTDIR
dest=$T/root
unitdir=$(make_dir systemdsystemunitdir)
prefix=$(make_dir prefix)
man1dir=$(make_dir man1dir)
[ "$unitdir" != no ] || skip "configured --with-systemdsystemunitdir=no"
install_tree "$dest"

units="discardcache@.service discardcache-nbd@.service discardfuse@.service discardfuse-loop@.service
  discardcache-prometheus.service discardcache-prometheus.timer"
# discardublk@ where discardublk is built (configure found liburing).
[ -x "$abs_top_builddir/ublk/discardublk" ] && units="$units discardublk@.service"
mkdir "$T/units"
for u in $units; do
    sed "s|$prefix/|$dest$prefix/|g" "$dest$unitdir/$u" >"$T/units/$u"
done

# verify UNIT...: systemd-analyze verify prints what is wrong and may
# still exit 0: any output is a failure.
verify ()
{
    (cd "$T/units" && MANPATH="$dest$man1dir/..:" systemd-analyze verify "$@") \
        >"$T/verify.out" 2>&1
    local rc=$?
    [ "$rc" -eq 0 ] && [ ! -s "$T/verify.out" ]
}
instances=()
for u in $units; do
    instances+=("$T/units/${u/@./@test.}")
done
for u in $units; do
    [ "$u" = "${u/@./@test.}" ] || cp "$T/units/$u" "$T/units/${u/@./@test.}"
done
verify "${instances[@]}" || { cat "$T/verify.out"; fail "systemd-analyze verify complains"; }
# The check can fail: a unit with a misspelt key does.
sed 's/^RestartSec=/RestartSecs=/' "$T/units/discardcache@test.service" >"$T/units/bad@test.service"
! verify "$T/units/bad@test.service" || fail "verify accepted a misspelt key"
grep -q "RestartSecs" "$T/verify.out" || { cat "$T/verify.out"; fail "verify did not name the bad key"; }
echo "systemd-analyze verify: $(echo $units): clean"

# The units' commands, run here.  unit_argv UNIT KEY [N]: the N-th (1)
# KEY= line of UNIT with %i=test, /run/discardcache under $T/run, the
# installed programs replaced by the build's, and $VAR (a word alone,
# split into words) and ${VAR} (within a word) expanded from this shell,
# in ARGV.
mkdir -p "$T/run" "$T/bin" "$T/libexec"
ln -s "$DISCARDCTL" "$T/bin/discardctl"
ln -s "$DISCARDFUSE" "$T/bin/discardfuse"
sed -e "s|^DISCARDCTL=.*|DISCARDCTL=\${DISCARDCTL:-$DISCARDCTL}|" \
    -e "s|^DISCARDUBLK=.*|DISCARDUBLK=\${DISCARDUBLK:-$abs_top_builddir/ublk/discardublk}|" \
    "$abs_top_builddir/systemd/discardcache-helper" >"$T/libexec/discardcache-helper"
chmod 0755 "$T/libexec/discardcache-helper"
helperdir=$(make_dir pkglibexecdir)
bindir=$(make_dir bindir)
unit_argv ()
{
    local line w v
    local -
    set -f
    line=$(sed -n "s/^$2=//p" "$abs_top_builddir/systemd/$1" | sed -n "${3:-1}p")
    [ -n "$line" ] || fail "$1 has no $2="
    line=${line//%i/test}
    line=${line//\/run\/discardcache/$T/run}
    line=${line//$helperdir/$T/libexec}
    line=${line//$bindir/$T/bin}
    ARGV=()
    for w in $line; do
        # ${VAR} inside a word: its value, as it is.
        while [[ $w =~ \$\{([A-Za-z_][A-Za-z0-9_]*)\} ]]; do
            v=${BASH_REMATCH[1]}
            w=${w//"${BASH_REMATCH[0]}"/${!v}}
        done
        case $w in
            \$*) v=${w:1}; ARGV+=(${!v}) ;;   # $VAR alone: split into words
            discardcache) ARGV+=("$PLUGIN") ;;
            *) ARGV+=("$w") ;;
        esac
    done
}

# discardcache@test: the example configuration's variables.
truncate -s 64M "$T/disk"
NBDKIT_LISTEN=$(sed -n 's/^Environment=NBDKIT_LISTEN=//p' "$abs_top_builddir/systemd/discardcache@.service")
NBDKIT_LISTEN=${NBDKIT_LISTEN//\/run\/discardcache/$T/run}
NBDKIT_LISTEN=${NBDKIT_LISTEN//%i/test}
DISCARDCACHE_ARGS="backend=$T/disk delay=1h idle=200ms"
unit_argv discardcache@.service ExecStart
[ "${ARGV[1]}" = -f ] || fail "discardcache@.service: nbdkit does not run in the foreground: ${ARGV[*]}"
"${ARGV[@]}" &
nbdkit_pid=$!
cleanup_fn stop_pid "$nbdkit_pid" "nbdkit (discardcache@test)"
# Its ExecStartPost (a shell command line: systemd's $$ is $) returns
# once nbdkit listens, so that discardcache-nbd@ (After=) finds the
# socket.
line=$(sed -n 's/^ExecStartPost=//p' "$abs_top_builddir/systemd/discardcache@.service")
line=${line//\$\$/\$}
line=${line//%i/test}
line=${line//\/run\/discardcache/$T/run}
timeout 30 bash -c "$line" || fail "discardcache@.service's ExecStartPost failed: $line"
[ -S "$T/run/test.nbd" ] || fail "ExecStartPost returned before nbdkit listened"
wait_for_ctl "$T/run/test.sock"
# discardcache-nbd@test attaches to that socket (no kernel NBD here: the
# command line only).
NBD_DEVICE=/dev/nbd0 NBD_ATTACH_ARGS=--connections=1
unit_argv discardcache-nbd@.service ExecStart
[ "${ARGV[1]}" = attach ] && [ "${ARGV[2]}" = --adopt ] &&
    [ "${ARGV[3]}" = "$T/run/test.nbd" ] && [ "${ARGV[4]}" = /dev/nbd0 ] ||
    fail "discardcache-nbd@.service does not attach to discardcache@'s socket: ${ARGV[*]}"
"$DISCARDCTL" -s "$T/run/test.sock" stats --json >"$T/out" ||
    fail "discardctl on discardcache@test's socket failed"
grep -q '"trims":0' "$T/out" || fail "discardcache@test: $(cat "$T/out")"

# discardcache-prometheus: this server, and a second one, in files.
textdir=$T/textfile
mkdir "$textdir"
echo 'discardcache_old 1' >"$textdir/discardcache-gone.prom"
echo 'other_metric 1' >"$textdir/other.prom"
truncate -s 16M "$T/disk-b"
start_nbdkit -P "$T/b.pid" -U "$T/b.nbd" "$PLUGIN" backend="$T/disk-b" readonly=true \
    ctl="$T/run/b.sock"
wait_for_ctl "$T/run/b.sock"
unit_argv discardcache-prometheus.service ExecStart
ARGV=("${ARGV[@]//\/var\/lib\/prometheus\/node-exporter/$textdir}")
"${ARGV[@]}" || fail "discardcache-prometheus.service's command failed: ${ARGV[*]}"
[ "$(cd "$textdir" && ls -A | sort | tr '\n' ' ')" = "discardcache-b.prom discardcache-test.prom other.prom " ] ||
    fail "textfile directory: $(ls -A "$textdir")"
for s in b test; do
    f=$textdir/discardcache-$s.prom
    [ "$(stat -c %a "$f")" = 644 ] || fail "$f is mode $(stat -c %a "$f"), not 0644"
    promtool check metrics <"$f" >"$T/promtool.out" 2>&1 ||
        { cat "$T/promtool.out"; fail "promtool check metrics: $f"; }
    [ ! -s "$T/promtool.out" ] || { cat "$T/promtool.out"; fail "promtool complains about $f"; }
    grep -q "^discardcache_trims_total{server=\"$s\"} 0$" "$f" || { cat "$f"; fail "$f: no labelled trims_total"; }
    grep -q "^discardcache_dropped_bytes_total{server=\"$s\",reason=\"full\"} 0$" "$f" ||
        { cat "$f"; fail "$f: labels not merged"; }
done
# What node-exporter itself makes of the two files (one server's metrics
# beside another's, told apart by the label), on a loopback port.
node_exporter=/usr/bin/prometheus-node-exporter
[ -x "$node_exporter" ] || skip "no $node_exporter (Debian package prometheus-node-exporter)"
for (( try = 0; try < 5; try++ )); do
    port=$(( 20000 + RANDOM % 20000 ))
    "$node_exporter" --collector.disable-defaults --collector.textfile \
        --collector.textfile.directory="$textdir" \
        --web.listen-address="127.0.0.1:$port" >"$T/ne.log" 2>&1 &
    ne_pid=$!
    cleanup_fn stop_pid "$ne_pid" node-exporter
    /usr/bin/python3 - "$port" >"$T/scrape" 2>/dev/null <<'PY' && break
import sys, time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode())
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
    stop_pid "$ne_pid" node-exporter
done
[ -s "$T/scrape" ] || { cat "$T/ne.log"; fail "node-exporter did not serve its metrics"; }
grep -qx 'node_textfile_scrape_error 0' "$T/scrape" ||
    { grep textfile "$T/scrape" "$T/ne.log"; fail "node-exporter could not read the files"; }
for s in b test; do
    grep -qx "discardcache_trims_total{server=\"$s\"} 0" "$T/scrape" ||
        fail "node-exporter does not serve server $s's metrics"
done
stop_pid "$ne_pid" node-exporter

# The server b stops: its file goes at the next run.
stop_pidfile "$T/b.pid" nbdkit
"${ARGV[@]}" || fail "discardcache-prometheus.service's command failed after a server stopped"
[ ! -e "$textdir/discardcache-b.prom" ] || fail "the file of a stopped server stayed"
[ -e "$textdir/discardcache-test.prom" ] || fail "the live server's file went"
echo "discardcache-prometheus: one labelled file a server, promtool clean, node-exporter reads them"

# Stop discardcache@test as systemd does (SIGTERM, then ExecStopPost).
stop_pid "$nbdkit_pid" "nbdkit (discardcache@test)"
unit_argv discardcache@.service ExecStopPost
"${ARGV[@]}"
[ ! -e "$T/run/test.nbd" ] && [ ! -e "$T/run/test.sock" ] && [ ! -e "$T/run/test.pid" ] ||
    fail "sockets left after stop: $(ls "$T/run")"

# discardfuse@test, then discardfuse-loop@test, then the stop in order.
requires_fuse
requires_loop
DISCARDFUSE_MOUNTPOINT=$T/run/test.fuse
unit_argv discardfuse@.service ExecStartPre
"${ARGV[@]}" || fail "discardfuse@.service's ExecStartPre failed: ${ARGV[*]}"
unit_argv discardfuse@.service ExecStart
[ "${ARGV[1]}" = -f ] || fail "discardfuse@.service: not in the foreground: ${ARGV[*]}"
"${ARGV[@]}" &
fuse_pid=$!
cleanup_fn stop_discardfuse "$DISCARDFUSE_MOUNTPOINT" "$fuse_pid"
unit_argv discardfuse@.service ExecStartPost
"${ARGV[@]}" || fail "discardfuse@.service's wait-mount failed"
[ -e "$DISCARDFUSE_MOUNTPOINT/disk" ] || fail "wait-mount returned before the mount"
unit_argv discardfuse-loop@.service ExecStart
"${ARGV[@]}" >"$T/attach.out" || fail "discardfuse-loop@.service's ExecStart failed"
loop=$(readlink "$T/run/test.loop") || fail "no link $T/run/test.loop"
# Our cleanup for that device, in case the detach below fails.
_loop_files[$loop]=$DISCARDFUSE_MOUNTPOINT/disk
cleanup_fn detach_loop "$loop"
[ "$(losetup -n -O BACK-FILE "$loop")" = "$DISCARDFUSE_MOUNTPOINT/disk" ] ||
    fail "$loop is not on $DISCARDFUSE_MOUNTPOINT/disk"
[ "$(losetup -n -O DIO "$loop" | tr -d ' ')" = 1 ] || fail "$loop without direct I/O"
head -c 1M /dev/urandom >"$T/data"
dd if="$T/data" of="$loop" bs=1M oflag=direct status=none || fail "write through $loop"
cmp -n 1048576 "$T/data" "$T/disk" || fail "the data did not reach the backend"
# Stop: the loop unit first (After=, BindsTo=), then discardfuse by SIGTERM.
unit_argv discardfuse-loop@.service ExecStop
"${ARGV[@]}" || fail "discardfuse-loop@.service's ExecStop failed"
[ -z "$(losetup -n -j "$DISCARDFUSE_MOUNTPOINT/disk")" ] || fail "still attached after ExecStop"
[ ! -e "$T/run/test.loop" ] || fail "the link stayed"
kill -TERM "$fuse_pid"
await_exit "$fuse_pid" discardfuse SIGTERM || fail "discardfuse@test exited $? at stop"
! grep -qF " $DISCARDFUSE_MOUNTPOINT fuse" /proc/mounts || fail "still mounted after stop"
echo "discardfuse@ and discardfuse-loop@: started, used and stopped in order"

# discardublk@test, where built, on a host without ublk: the helper runs
# discardublk itself (exec), which says what is missing and exits 1 (the
# guest test, tests/guest/test-guest-ublk.sh, runs the helper's recovery).
case $units in *discardublk@*) ;; *) exit 0 ;; esac
[ ! -e /dev/ublk-control ] || { echo "discardublk@: this host has ublk: its start is left to the guest test"; exit 0; }
DISCARDUBLK_ID=7
unit_argv discardublk@.service ExecStart
[ "${ARGV[1]}" = ublk-start ] && [ "${ARGV[2]}" = 7 ] ||
    fail "discardublk@.service does not start through the helper: ${ARGV[*]}"
"${ARGV[@]}" >"$T/ublk.out" 2>&1 && fail "discardublk@test started without ublk"
grep -q "modprobe ublk_drv" "$T/ublk.out" || { cat "$T/ublk.out"; fail "discardublk@test: no word of ublk_drv"; }
! grep -q "recovering" "$T/ublk.out" || fail "the helper recovered a device that is not there"
DISCARDUBLK_ID=x
unit_argv discardublk@.service ExecStart
"${ARGV[@]}" >"$T/ublk.out" 2>&1 && fail "discardublk@test started with DISCARDUBLK_ID=x"
grep -q "is not a number" "$T/ublk.out" || { cat "$T/ublk.out"; fail "no word of the bad DISCARDUBLK_ID"; }
echo "discardublk@: the helper starts discardublk, which refuses a kernel without ublk"
