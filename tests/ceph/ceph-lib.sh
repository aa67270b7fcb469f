# SPDX-License-Identifier: BSD-3-Clause
# discardcache: a throwaway Ceph cluster for a test (tests/ceph/cluster),
# stopped by pid at exit whatever happens.  Source tests/functions.sh
# first.  Under CI=true a missing prerequisite fails (skip does).

CEPH_CLUSTER=$abs_top_srcdir/tests/ceph/cluster

# ceph_requires: skip unless a cluster can run here and the build has
# the RBD backend.
ceph_requires ()
{
    requires_root
    local c
    for c in ceph-mon ceph-osd ceph-mgr ceph monmaptool rbd rados ceph-authtool uuidgen; do
        command -v "$c" >/dev/null 2>&1 ||
            skip "$c not found (scripts/install-deps installs Ceph)"
    done
    "$NBDKIT" "$PLUGIN" --dump-plugin 2>/dev/null |
        grep -q '^discardcache_backends=.*rbd' ||
        skip "the plugin was built without the RBD backend (install librbd-dev librados-dev, configure --with-rbd)"
}

# ceph_start: a cluster in $TESTDIR/ceph (mktempdir first); exports
# CEPH_CONF, and stops it (by the pids it recorded) at exit.
ceph_start ()
{
    local t=$SECONDS
    cleanup_fn "$CEPH_CLUSTER" stop "$TESTDIR/ceph"
    "$CEPH_CLUSTER" start "$TESTDIR/ceph" >/dev/null ||
        fail "the Ceph cluster did not start (logs: $TESTDIR/ceph/log)"
    export CEPH_CONF=$TESTDIR/ceph/ceph.conf
    echo "ceph: cluster up in $(( SECONDS - t )) s ($CEPH_CONF)"
}

# rbd_used POOL/IMAGE: the bytes `rbd du` shows used.
rbd_used ()
{
    rbd du --format json "$1" |
        /usr/bin/python3 -c 'import json,sys; print(sum(i["used_size"] for i in json.load(sys.stdin)["images"]))'
}
