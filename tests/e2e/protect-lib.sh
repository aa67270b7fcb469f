# SPDX-License-Identifier: BSD-3-Clause
# discardcache: helpers of the tests of invariant 11 (circuit breaker,
# windows, proof of effect).  Source tests/functions.sh first.

# wait_stat SOCKET KEY VALUE SECONDS: until the statistic equals VALUE.
wait_stat ()
{
    local i v
    for (( i = 0; i < $4 * 10; i++ )); do
        v=$(ctl_stat "$1" "$2")
        [ "$v" = "$3" ] && return 0
        sleep 0.1
    done
    fail "$2 is $v after $4 s, expected $3"
}

# nbd_io SOCKET PYTHON...: run python with h connected to the server.
nbd_io ()
{
    local sock=$1
    shift
    /usr/bin/python3 -c "import nbd, sys
h = nbd.NBD()
h.connect_unix(sys.argv[1])
$*
h.shutdown()" "$sock" || fail "nbd client: $*"
}
