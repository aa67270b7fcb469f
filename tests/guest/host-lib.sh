# SPDX-License-Identifier: BSD-3-Clause
# discardcache's guest harness: helpers for the host side of a guest test
# (tests/guest/test-guest-*.sh).  Source tests/functions.sh first.
#
#   guest_test_setup          TESTDIR (removed at exit) and GOUT, the
#                             results directory the guest writes (kept
#                             in TESTDIR; its console.log and dmesg are
#                             printed when the guest fails)
#   guest_image NAME SIZE     a sparse image GOUT/NAME.img (IMAGE)
#   guest_run RUN-OPTIONS... -- COMMAND...
#                             tests/guest/run --out GOUT ...; exits with
#                             its status when it skipped (77)

guest_test_setup ()
{
    # The guest loads the plain build's plugin in an unwrapped nbdkit:
    # sanitizer builds leave the guest tests to the plain build.
    case ${SANITIZERS:-no} in
    no|'') ;;
    *) echo "$0: SKIP: the guest tests run in the plain build" >&2; exit 77 ;;
    esac
    [ -e "$PLUGIN" ] || fail "$PLUGIN is missing: build first (make)"
    mktempdir
    GOUT=$TESTDIR/out
    mkdir -p "$GOUT"
}

guest_image ()
{
    IMAGE=$GOUT/$1.img
    truncate -s "$2" "$IMAGE" || fail "cannot create $IMAGE"
}

guest_run ()
{
    local status
    "$abs_top_srcdir/tests/guest/run" --out "$GOUT" "$@"
    status=$?
    case $status in
    0) ;;
    77) exit 77 ;;
    *)
        if [ -s "$GOUT/dmesg" ]; then
            echo "== the guest's dmesg (last 60 lines)" >&2
            tail -n 60 "$GOUT/dmesg" >&2
        fi
        fail "the guest's command exited $status" ;;
    esac
}
