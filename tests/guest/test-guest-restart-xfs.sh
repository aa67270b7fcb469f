#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 37's counts under XFS through two connections: 20 restarts by
# SIGTERM, 5 by kill -9 (tests/guest/restart-host.sh; RESTART_TERMS=
# and RESTART_KILLS= shorten it while debugging).
exec bash "$abs_top_srcdir/tests/guest/restart-host.sh" xfs 2 \
    "${RESTART_TERMS:-20}" "${RESTART_KILLS:-5}"
