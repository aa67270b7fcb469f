#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the nbd backend against nbdkit on Unix sockets: a
# read-write memory disk (trims reach the server, with FUA), a read-only
# server, a server without trim, zero, flush or multi-conn, and one with
# block size limits and slow trims (chunking, the connection pool); and
# the plugin daemonised in front of the memory disk.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"
set -e
set -u

nbdkit=${NBDKIT:-nbdkit}
requires "$nbdkit" --version
requires "$nbdkit" memory --version
requires "$nbdkit" eval --version
requires "$nbdkit" --filter=log --filter=nozero --filter=delay \
    --filter=blocksize-policy null --version
requires /usr/bin/python3 -c 'import nbd'
prog=${abs_top_builddir:-$PWD}/tests/unit/test-backend-nbd

mktempdir
dir=$TESTDIR
uri () { echo "nbd+unix:///?socket=$dir/$1.sock"; }

start_nbdkit -P "$dir/rw.pid" -U "$dir/rw.sock" \
    --filter=log memory 64M logfile="$dir/rw.log"
"$prog" rw "$(uri rw)" || exit 1
# The backend's trims reached the server: the FUA one and the whole disk.
for trim in 'offset=0x100000 count=0x100000 fua=1' \
            'offset=0x0 count=0x4000000 fua=0'; do
    if ! grep -q "Trim id=[0-9]* $trim" "$dir/rw.log"; then
        echo "$0: FAIL: no Trim $trim in nbdkit's log:" >&2
        grep Trim "$dir/rw.log" >&2
        exit 1
    fi
done

# Daemonised (no -f), nbdkit forks after get_ready, where the backend is
# opened: its reader threads must start after the fork (backend_start),
# or no request is ever answered.
"$nbdkit" -P "$dir/daemon.pid" -U "$dir/daemon.sock" "$PLUGIN" \
    backend="$(uri rw)" ctl=none || fail "the daemonised plugin did not start"
wait_for_file "$dir/daemon.pid"
cleanup_fn stop_pidfile "$dir/daemon.pid" "nbdkit (daemonised)"
timeout 30 /usr/bin/python3 -c '
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\x5a" * 65536, 4096)
assert h.pread(65536, 4096) == b"\x5a" * 65536
h.flush()' "$(uri daemon)" || fail "no answer from the daemonised plugin (a backend thread started before the fork?)"

start_nbdkit -P "$dir/ro.pid" -U "$dir/ro.sock" -r memory 64M
"$prog" ro "$(uri ro)" || exit 1

disk=$dir/notrim.img
truncate -s 64M "$disk"
start_nbdkit -P "$dir/notrim.pid" -U "$dir/notrim.sock" \
    --filter=nozero eval \
    get_size='echo 67108864' \
    pread="dd if='$disk' skip=\$4 count=\$3 iflag=count_bytes,skip_bytes status=none" \
    pwrite="dd of='$disk' seek=\$4 conv=notrunc oflag=seek_bytes iflag=fullblock status=none"
"$prog" notrim "$(uri notrim)" || exit 1

start_nbdkit -P "$dir/sizes.pid" -U "$dir/sizes.sock" \
    --filter=blocksize-policy --filter=delay memory 64M \
    blocksize-minimum=512 blocksize-preferred=64K blocksize-maximum=1M \
    blocksize-error-policy=error delay-trim=1
"$prog" sizes "$(uri sizes)" || exit 1
