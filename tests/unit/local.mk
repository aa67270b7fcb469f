# SPDX-License-Identifier: BSD-3-Clause
# The unit-test programs (cmocka, most against the in-memory backend),
# one fragment a concern.  The scripts that drive some of them with
# arguments are listed in tests/e2e/local.mk.
include tests/unit/extmap.mk
include tests/unit/backend.mk
include tests/unit/engine.mk
include tests/unit/ctl.mk
include tests/unit/state.mk
include tests/unit/journal.mk
include tests/unit/pacing.mk
include tests/unit/stats.mk
include tests/unit/protect.mk
include tests/unit/small.mk
include tests/unit/thin.mk
include tests/unit/rbd-lib.mk
include tests/unit/verify.mk
