# SPDX-License-Identifier: BSD-3-Clause
# cache/: the discard cache.  The libraries below the engine first (pure:
# they see common/, backend/'s limits and extmap/, never the engine),
# then the engine itself (cache/README.md).
include cache/policy/local.mk
include cache/protect/local.mk
include cache/persist/local.mk
include cache/engine/local.mk
EXTRA_DIST += cache/README.md
