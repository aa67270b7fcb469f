#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The end-to-end XFS churn test again, through discardfuse + losetup
# instead of nbdkit + nbdfuse, with the same checks.
export E2E_FRONTEND=fuse
exec bash "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/e2e/test-e2e-xfs.sh"
