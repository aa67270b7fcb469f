#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the backend server dies and comes back, under the
# concurrent verifier.  The backend is nbdkit's file plugin on a file
# (the data outlives the server); it is stopped and started again four
# times while the verifier runs, alternately with SIGKILL (it vanishes)
# and SIGTERM (it shuts down: nbdkit answers ESHUTDOWN to requests it
# has not started).  While it is away, clients get EIO (never a crash,
# never another errno: the man page promises EIO) and failed discards
# stay pending; once it is back, the plugin reconnects by itself, the
# first flush reports that unflushed writes may have been lost, the
# pending discards go out, and no acknowledged write is missing.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
source "$abs_top_srcdir/tests/e2e/verify-lib.sh"
requires "$NBDKIT" file --version

verify_setup
dir=$TESTDIR
truncate -s 64M "$FASTDIR/disk.img"
uri="nbd+unix:///?socket=$dir/dev.sock"

start_dev ()
{
    rm -f "$dir/dev.sock"
    start_nbdkit -P "$dir/dev.$1.pid" -U "$dir/dev.sock" file "$FASTDIR/disk.img"
}

start_dev 0
start_nbdkit -P "$dir/dc.pid" -U "$dir/dc.sock" "$PLUGIN" backend="$uri" \
    delay=0 idle=0 budget=off statsfile="$dir/dc.stats.json" 2>"$dir/dc.log"

echo "== reconnect (seed $VERIFY_SEED)"
"$VERIFY" --uri "nbd+unix:///?socket=$dir/dc.sock" --seed "$VERIFY_SEED" \
    --seconds 9 --ops 0 --expect-errors --save-model "$dir/model" \
    > "$dir/verify.out" &
vpid=$!
cleanup_fn stop_pid "$vpid" verify
for i in 1 2 3 4; do
    sleep 1.5
    signal=KILL
    [ $(( i % 2 )) -eq 0 ] && signal=TERM
    kill -"$signal" "$(cat "$dir/dev.$(( i - 1 )).pid")"
    sleep 0.4
    start_dev "$i"
done
wait "$vpid" || verify_failed reconnect "$dir/verify.out"
cat "$dir/verify.out"
stop_pidfile "$dir/dc.pid" nbdkit
cat "$dir/dc.stats.json"

# Every block once more through a fresh plugin.
start_nbdkit -P "$dir/check.pid" -U "$dir/check.sock" "$PLUGIN" backend="$uri"
"$VERIFY" --uri "nbd+unix:///?socket=$dir/check.sock" \
    --load-model "$dir/model" --verify-only > "$dir/check.out" ||
    verify_failed "reconnect (after restart)" "$dir/check.out"
cat "$dir/check.out"

result () { verify_result_of "$dir/verify.out" "$1"; }
[ "$(result write_errors)" -gt 0 ] || fail "no write met the dead server"
for op in write zero flush read; do
    [ "$(result ${op}_errors)" -eq "$(result ${op}_eio)" ] || {
        grep "failed with" "$dir/verify.out"
        fail "$op errors other than EIO reached the client"
    }
done
[ "$(result trim_errors)" -eq 0 ] || fail "a trim failed at the client"
[ "$(result ops)" -gt 1000 ] || fail "only $(result ops) operations: no recovery?"
[ "$(json_get "$dir/dc.stats.json" forward_errors)" -gt 0 ] ||
    fail "no discard met the dead server"
[ "$(json_get "$dir/dc.stats.json" pending_bytes)" -eq \
  "$(json_get "$dir/dc.stats.json" subgranule_bytes)" ] ||
    fail "whole granules still pending after the stop"
# Each stop loses the connections; after a SIGKILL the server is away
# for a while (connects fail, then "reconnected"), after a SIGTERM the
# next attempt may already find the new one.
# Every stop is seen: the first connection, which every read and write
# tries first, is lost each time.  (Counting any connection's loss let a
# reconnect that hung on the dying server's socket for the connect
# timeout hide the two stops behind it: four connections, two stops.)
lost=$(grep -c "connection 0 lost" "$dir/dc.log")
[ "$lost" -ge 4 ] || { cat "$dir/dc.log"; fail "the first connection was lost only $lost times, not 4: a stop went unseen"; }
n=$(grep -c "reconnected" "$dir/dc.log")
[ "$n" -ge 2 ] || { cat "$dir/dc.log"; fail "reconnected only $n times, not 2"; }
echo "reconnect: ok ($(result ops) operations, $(result write_errors) writes" \
     "failed while the server was away, $n reconnections)"

# A loss the reader sees while no request is on the connection counts
# too: an unflushed write, the server killed and back while the plugin
# idles, and the next flush must fail (the write may have died with the
# server), the loss logged once.
echo "== a loss while idle"
start_dev 5
start_nbdkit -P "$dir/idle.pid" -U "$dir/idle.sock" "$PLUGIN" backend="$uri" \
    ctl=none 2>"$dir/idle.log"
PATH=/usr/bin:$PATH timeout 60 nbdsh -u "nbd+unix:///?socket=$dir/idle.sock" \
    -c 'h.pwrite(b"x" * 4096, 0)' \
    -c "open('$dir/written', 'w').close()" \
    -c "import os, time
while not os.path.exists('$dir/restarted'): time.sleep(0.05)" \
    -c 'try:
    h.flush()
    print("flush: ok")
except nbd.Error as e:
    print("flush: errno", e.errno)' > "$dir/idle.out" 2>&1 &
npid=$!
cleanup_fn stop_pid "$npid" nbdsh
wait_for_file "$dir/written" 60 || fail "nbdsh did not write"
kill -KILL "$(cat "$dir/dev.5.pid")"
sleep 1
start_dev 6
# The plugin goes before the server it holds (nbdkit waits for clients).
cleanup_fn stop_pidfile "$dir/idle.pid" nbdkit
touch "$dir/restarted"
wait "$npid" || { cat "$dir/idle.out"; fail "nbdsh failed"; }
cat "$dir/idle.out"
grep -qx "flush: errno EIO" "$dir/idle.out" || { cat "$dir/idle.log"; fail "the flush after an unseen loss did not fail with EIO"; }
[ "$(grep -c "connection 0 lost: the server closed the connection" "$dir/idle.log")" -eq 1 ] ||
    { cat "$dir/idle.log"; fail "the idle loss was not logged once"; }
stop_pidfile "$dir/idle.pid" nbdkit
echo "idle loss: ok"
